"""The API server's audit log: the policy the plane starts kube-apiserver with, and what a test
or a benchmark reads from it (which requests a client sent, counted by its user agent).

Owns `write_policy`, `events` and `requests`. Must not start the server (components.py passes
the policy) nor decide what counts as too many requests (the tests and benchmarks do).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Every request when it arrives (a watch too, while it is still open) and when it is answered
# (with its status code).
_POLICY = (
    "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
    "omitStages: [ResponseStarted, Panic]\n"
    "rules:\n- level: Metadata\n"
)


def write_policy(directory: Path) -> Path:
    policy = directory / "audit-policy.yaml"
    policy.write_text(_POLICY)
    return policy


def events(log: Path) -> list[dict[str, Any]]:
    """The audit events so far (RequestReceived and ResponseComplete of each request)."""
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def requests(log: Path, user_agent: str) -> list[str]:
    """`VERB requestURI` of each request the server received from `user_agent`."""
    return [
        f"{e.get('verb', '').upper()} {e.get('requestURI', '')}"
        for e in events(log)
        if e.get("userAgent") == user_agent and e.get("stage") == "RequestReceived"
    ]
