"""mig-parted's two companion files (v1): the rules a JSON Schema cannot express in the hooks
file and in the MIG manager's GPU clients file (docs/upstream-facts.md M1, M3).

Owns `check_hooks` (hook envs that mig-parted overrides) and `check_gpu_clients` (service
names the MIG manager cannot stop). The structure is the job of
`schemas/mig-parted-hooks.v1.json` and `schemas/mig-manager-gpu-clients.v1.json`; the checks
here run on the same plain data even when the structure is broken, so they skip what has the
wrong shape and never raise. Must not check the config file itself (spec.py does), nor read
files. Pure: standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Path

# `apply` sets these for every hook from its own flags, over what the hook's envs say.
_MIG_PARTED_ENVS = frozenset(
    {
        "MIG_PARTED_CONFIG_FILE",
        "MIG_PARTED_SELECTED_CONFIG",
        "MIG_PARTED_HOOKS_FILE",
        "MIG_PARTED_SKIP_RESET",
        "MIG_PARTED_MODE_CHANGE_ONLY",
    }
)
_UNIT_SUFFIXES = (
    ".service", ".socket", ".target", ".device", ".mount", ".automount", ".swap", ".path",
    ".timer", ".slice", ".scope",
)  # fmt: skip


def check_hooks(doc: Mapping[str, Any]) -> list[Finding]:
    """Semantic problems in a mig-parted hooks file; never raises."""
    hooks = doc.get("hooks") if isinstance(doc, Mapping) else None
    if not isinstance(hooks, Mapping):
        return []
    found: list[Finding] = []
    for name, entries in hooks.items():
        if not isinstance(entries, list):
            continue
        for index, hook in enumerate(entries):
            envs = hook.get("envs") if isinstance(hook, Mapping) else None
            if isinstance(envs, Mapping):
                found.extend(_check_hook_envs(("hooks", name, index, "envs"), envs))
    return found


def _check_hook_envs(path: Path, envs: Mapping[Any, Any]) -> list[Finding]:
    return [
        dataclasses.replace(
            findings.warning(
                (*path, key),
                "mig.hook-env-overridden",
                f"mig-parted sets {key} for every hook from its own settings, so this value is "
                "never seen by the command",
                f"read {key} as mig-parted sets it, or use a variable name of your own",
            ),
            at_key=True,
        )
        for key in envs
        if key in _MIG_PARTED_ENVS
    ]


def check_gpu_clients(doc: Mapping[str, Any]) -> list[Finding]:
    """Semantic problems in a MIG manager GPU clients file; never raises."""
    services = doc.get("systemd-services") if isinstance(doc, Mapping) else None
    if not isinstance(services, list):
        return []
    found: list[Finding] = []
    seen: set[str] = set()
    for index, service in enumerate(services):
        if not isinstance(service, str) or not service.strip():
            continue
        path: Path = ("systemd-services", index)
        found.extend(_check_service(path, service.strip(), seen))
        seen.add(service.strip())
    return found


def _check_service(path: Path, service: str, seen: set[str]) -> list[Finding]:
    if "," in service:
        return [
            findings.error(
                path,
                "mig.gpu-client-comma",
                f"'{service}' contains a comma: the MIG manager joins the list with commas and "
                "splits it again, so it would stop and restart these as separate units",
                "list each service as its own item",
            )
        ]
    if service in seen:
        return [
            findings.warning(
                path,
                "mig.duplicate-gpu-client",
                f"'{service}' is listed twice",
                "remove the second entry",
            )
        ]
    if not service.endswith(_UNIT_SUFFIXES):
        return [
            findings.warning(
                path,
                "mig.gpu-client-not-unit",
                f"'{service}' is not a full systemd unit name: the MIG manager asks systemd over "
                "D-Bus, which (unlike systemctl) does not add '.service', so this service is "
                "never stopped",
                f"write '{service}.service'",
            )
        ]
    return []
