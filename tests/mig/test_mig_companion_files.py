"""The hooks and GPU-clients files: the few rules beyond their shape."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.findings import Severity
from kubectl_gpu.mig import companions

E, W = Severity.ERROR, Severity.WARNING


def hooks(envs: Any, name: str = "apply-start") -> dict[str, Any]:
    return {"version": "v1", "hooks": {name: [{"command": "/bin/true", "envs": envs}]}}


@pytest.mark.parametrize(
    "variable",
    [
        "MIG_PARTED_CONFIG_FILE",
        "MIG_PARTED_SELECTED_CONFIG",
        "MIG_PARTED_HOOKS_FILE",
        "MIG_PARTED_SKIP_RESET",
        "MIG_PARTED_MODE_CHANGE_ONLY",
    ],
)
def test_a_hook_cannot_set_what_mig_parted_sets_from_its_flags(variable: str) -> None:
    (finding,) = companions.check_hooks(hooks({"OTHER": "x", variable: "y"}, "apply-exit"))
    assert (finding.severity, finding.code, finding.path, finding.at_key) == (
        W,
        "mig.hook-env-overridden",
        ("hooks", "apply-exit", 0, "envs", variable),
        True,
    )
    assert variable in finding.message


@pytest.mark.parametrize(
    "doc",
    [
        hooks({"MIG_PARTED_DEBUG": "true", "PATH": "/usr/bin"}),
        hooks(None),
        hooks(["MIG_PARTED_SELECTED_CONFIG"]),
        {"version": "v1", "hooks": {"apply-start": "x"}},
        {"version": "v1", "hooks": {"apply-start": [None, "x"]}},
        {"version": "v1", "hooks": None},
        {},
    ],
)
def test_hooks_without_overridden_variables_or_of_the_wrong_shape_pass(doc: Any) -> None:
    assert companions.check_hooks(doc) == []


def clients(*services: Any) -> dict[str, Any]:
    return {"version": "v1", "systemd-services": list(services)}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (clients("nvsm.service", "nvidia-dcgm.service", "dcgm.socket", " kubelet.service "), []),
        (clients("nvidia-dcgm"), [(W, "mig.gpu-client-not-unit", 0)]),
        (clients("nvsm.service", "a.service,b.service"), [(E, "mig.gpu-client-comma", 1)]),
        (clients("nvsm.service", "dcgm.service", "nvsm.service"),
         [(W, "mig.duplicate-gpu-client", 2)]),
        (clients("nvsm.service", " nvsm.service"), [(W, "mig.duplicate-gpu-client", 1)]),
        (clients("", 3, None, "  "), []),
        ({"systemd-services": "nvsm.service"}, []),
        ({}, []),
    ],
)  # fmt: skip
def test_gpu_clients(doc: Any, expected: list[tuple[Severity, str, int]]) -> None:
    found = companions.check_gpu_clients(doc)
    assert [(f.severity, f.code, f.path[-1]) for f in found] == expected
    assert all(f.path[0] == "systemd-services" for f in found)


def test_not_a_unit_name_hint_gives_the_full_name() -> None:
    (finding,) = companions.check_gpu_clients(clients("nvsm"))
    assert finding.hint == "write 'nvsm.service'"
    assert "D-Bus" in finding.message
