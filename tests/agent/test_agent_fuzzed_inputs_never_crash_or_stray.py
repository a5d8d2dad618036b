"""Fuzzed MIG ConfigMap values and node labels: an agent pass never dies of them (no exception
but a reported GpuError, never an internal error) and never touches a GPU outside the
selection the config resolves to (none at all when `validate` rejects the config).

On the real control plane: the 40 examples share one cluster (hypothesis runs them in one
call of the test), each agent pass settling it (about 17 s in all on 2 cores)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kubectl_gpu import errors, keys, validation
from kubectl_gpu.mig.spec import MigConfigFile
from tests.agent.fixtures import Agent, store_text
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

NODE = "gpu-1"
GPUS = (0, 1, 2)
PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1c.3g.40gb", "1g.20gb+me"]
COUNTS = st.one_of(
    st.integers(-3, 9),
    st.sampled_from([99999999999999999999, 7.0, 1.5, True, "2", None]),
)
# Valid specs that select only some GPUs: where a stray change would show.
VALID_SPEC = st.fixed_dictionaries(
    {
        "devices": st.sampled_from(["all", [0], [1], [2], [0, 2]]),
        "mig-enabled": st.booleans(),
        "mig-devices": st.sampled_from([{}, {"3g.40gb": 2}, {"1g.10gb": 7}, {"7g.80gb": 1}]),
    },
    optional={"device-filter": st.sampled_from(["0x233010DE", "0x20B010DE"])},
).map(lambda s: s if s["mig-enabled"] else {**s, "mig-devices": {}})
WILD_SPEC = st.fixed_dictionaries(
    {
        "devices": st.one_of(
            st.just("all"),
            st.lists(st.one_of(st.integers(-1, 4), st.booleans()), max_size=3),
            st.sampled_from(["x", 5, None, [[0]], [{}]]),
        ),
        "mig-enabled": st.one_of(st.booleans(), st.sampled_from(["true", "maybe", None, 1])),
        "mig-devices": st.one_of(
            st.dictionaries(st.sampled_from([*PROFILES, "9g.1gb", "x"]), COUNTS, max_size=3),
            st.sampled_from([None, [], "1g.10gb"]),
        ),
    },
    optional={
        "device-filter": st.sampled_from(
            ["0x233010DE", "0x20B010DE", ["0x233010DE"], [5, {}], "", "junk", 7]
        )
    },
)
# Raw lines no dumper writes: tagged and huge scalars, spliced in as one spec's mig-devices.
RAW = st.sampled_from(
    [
        "",
        "1g.10gb: !!int x",
        "1g.10gb: !!float x",
        "1g.10gb: " + "9" * 5000,
        "1g.10gb: 0x2",
        "1g.10gb: 1:30",
        "1g.10gb: !!bool maybe",
        "? [1g.10gb]\n        : 1",
        "1g.10gb: &a 1\n        2g.20gb: *a",
    ]
)
LABELS = st.fixed_dictionaries(
    {
        keys.MIG_DESIRED_LABEL: st.sampled_from(["fuzz", "fuzz", "absent-name", None]),
        keys.MIG_STRATEGY_LABEL: st.sampled_from(["mixed", "single", "bogus", None]),
    }
)


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster([f"{NODE}=H100-SXM5-80GB:{len(GPUS)}"], layouts.helm())


def _text(specs: list[dict[str, Any]], raw: str) -> str:
    text = yaml.safe_dump({"version": "v1", "mig-configs": {"fuzz": specs}}, sort_keys=False)
    if raw:
        head = "version: v1\nmig-configs:\n  fuzz:\n    - devices: all\n      mig-enabled: true\n"
        text = head + "      mig-devices:\n        " + raw + "\n"
    return text


def _selected(cluster: SimCluster, text: str, desired: str | None) -> set[int]:
    """The GPUs the agent may touch: those the config selects, if validate accepts it."""
    if desired != "fuzz" or not validation.validate_text(text, "c", "mig-config").valid:
        return set()
    specs = MigConfigFile.from_dict(yaml.safe_load(text)).select("fuzz")
    fake = cluster.nvml(NODE)
    return {
        i
        for i in GPUS
        for s in specs
        if s.selects(i, fake.gpu(i).pci_device_id, fake.gpu(i).pci_subsystem_id)
    }


@settings(
    max_examples=40,  # a few minutes of runs found nothing more (see the report)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=st.lists(st.one_of(VALID_SPEC, VALID_SPEC, WILD_SPEC), min_size=1, max_size=2),
    raw=st.one_of(st.just(""), RAW),
    labels=LABELS,
)
def test_fuzzed_configs_and_labels_never_crash_or_stray(
    cluster: SimCluster,
    agent: Agent,
    specs: list[dict[str, Any]],
    raw: str,
    labels: dict[str, str | None],
) -> None:
    text = _text(specs, raw)
    store_text(cluster, "fuzz", text)
    cluster.client.patch("nodes", NODE, {"metadata": {"labels": labels}})
    before = {i: cluster.nvml(NODE).gpu(i).snapshot() for i in GPUS}

    try:
        agent(cluster, NODE, timeout=0.5)  # a wait that times out is a reported failure
    except errors.InternalError as e:  # a bug, fenced: the test must still fail
        pytest.fail(f"internal error on {text!r}: {e.message}")
    except errors.GpuError:
        pass  # reported on the Node; a later pass goes on

    allowed = _selected(cluster, text, labels[keys.MIG_DESIRED_LABEL])
    changed = {i for i in GPUS if cluster.nvml(NODE).gpu(i).snapshot() != before[i]}
    event(f"GPUs changed: {len(changed)}, may change: {len(allowed)}")
    assert changed <= allowed, f"GPUs {changed - allowed} touched by {text!r}"
