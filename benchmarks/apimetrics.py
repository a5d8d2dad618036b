"""The API server's own count of the requests it answered (its /metrics,
`apiserver_request_total` by verb, resource, subresource and code), for the fleet benchmarks
(`fleet`, `agent_burst`): read before and after a step, the difference is the step's requests.
A WATCH is counted when it ends; the GET of /metrics itself has no resource.
"""

from __future__ import annotations

import collections
import re
from typing import Any

_COUNTER = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
Request = tuple[str, str, str, str]  # verb, resource, subresource, code


def requests(plane: Any) -> collections.Counter[Request]:
    """(verb, resource, subresource, code) → requests so far."""
    found: collections.Counter[Request] = collections.Counter()
    for line in plane.get("/metrics").splitlines():
        match = _COUNTER.match(line)
        if match:
            labels = dict(_LABEL.findall(match["labels"]))
            verb, resource, subresource, code = (
                labels.get(k, "") for k in ("verb", "resource", "subresource", "code")
            )
            found[verb, resource, subresource, code] += int(float(match["value"]))
    return found


def by_verb(calls: collections.Counter[Request]) -> collections.Counter[str]:
    """`verb resource` → requests, whatever their subresource and answer."""
    found: collections.Counter[str] = collections.Counter()
    for (verb, resource, _, _), count in calls.items():
        found[f"{verb} {resource}"] += count
    return found
