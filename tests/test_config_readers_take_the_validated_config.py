"""One gate for configs: the agent (`nodestate.read_config`), `share` (its ConfigMap's state)
and `mig apply -f` / `mig validate -f` each take the config `validation` read and accepted,
not a parse of their own, and each words a rejection the same way: the first error (file,
line, JSON path, message), how many more, and the `kubectl gpu validate` hint.

The agent reads our ConfigMap on the real kube-apiserver, as it does on a node; a key under
`binaryData` (base64 of the file) is read as a pod mounting the ConfigMap reads it, as
NVIDIA's config-manager does. A GPU Operator ConfigMap holding a mig-parted config is opened
by validation, with the other holders."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster, keys, validation
from kubectl_gpu.agent import nodestate
from kubectl_gpu.workflows.share import state
from tests.conftest import CliResult
from tests.kit.plane.plane import ControlPlane
from tests.workflows.sharebuilders import helm

Run = Callable[..., CliResult]
GOOD = """version: v1
mig-configs:
  halves:
    - devices: all
      mig-enabled: true
      mig-devices:
        3g.40gb: 2
"""
# two errors: an unknown device selector (line 4) and a negative count (line 7)
BAD = GOOD.replace("devices: all", "devices: some").replace("3g.40gb: 2", "3g.40gb: -1")
_names = itertools.count()


@pytest.fixture
def api(module_plane: ControlPlane) -> Iterator[cluster.Api]:
    """The product's client on the real plane, with our namespace there."""
    api = cluster.connect(str(module_plane.kubeconfig))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": keys.NAMESPACE}}
    try:
        api.create(cluster.path("namespaces"), namespace)
    except Exception:  # noqa: BLE001 - there from an earlier test of the module
        pass
    yield api
    try:
        api.delete(cluster.path("configmaps", keys.MIG_CONFIGMAP, keys.NAMESPACE))
    except Exception:  # noqa: BLE001 - a test that wrote none
        pass


def store(api: cluster.Api, data: dict[str, str], binary: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": keys.MIG_CONFIGMAP, "namespace": keys.NAMESPACE},
            "data": data, "binaryData": binary or {}}  # fmt: skip
    api.create(cluster.path("configmaps", namespace=keys.NAMESPACE), body)


def rejection_of(text: str, file: str) -> validation.ConfigRejected:
    with pytest.raises(validation.ConfigRejected) as caught:
        validation.accept_mig_config(text, file)
    return caught.value


def test_the_gate_hands_back_the_data_it_read_and_the_typed_config() -> None:
    accepted = validation.accept_mig_config(GOOD, "mig.yaml")
    assert accepted.data["mig-configs"]["halves"][0]["mig-devices"] == {"3g.40gb": 2}
    [spec] = accepted.config.select("halves")
    assert spec.mig_enabled and [n for _, n in spec.mig_devices] == [2]


def test_a_rejection_names_the_first_error_how_many_more_and_the_validate_hint() -> None:
    rejected = rejection_of(BAD, "mig.yaml")
    assert rejected.message.startswith("mig.yaml line 4, at /mig-configs/halves/0/devices: ")
    assert rejected.message.endswith(" (and 1 more)")
    assert rejected.hint == "kubectl gpu validate -f FILE lists every problem and how to fix it"
    assert len(rejected.findings) == 2


def test_the_agent_takes_the_validated_config(api: cluster.Api) -> None:
    store(api, {"halves": GOOD})
    request, specs = nodestate.read_config(api, keys.NAMESPACE, "halves")
    assert specs == validation.accept_mig_config(GOOD, "any").config.select("halves")
    assert request.startswith("halves@")


def test_the_agent_reads_a_config_under_binary_data(api: cluster.Api) -> None:
    # a pod mounting the ConfigMap sees the decoded file; the agent read only `data` before
    store(api, {}, {"halves": base64.b64encode(GOOD.encode()).decode()})
    _, specs = nodestate.read_config(api, keys.NAMESPACE, "halves")
    assert specs == validation.accept_mig_config(GOOD, "any").config.select("halves")


def test_the_agent_words_a_rejection_as_validation_does(api: cluster.Api) -> None:
    store(api, {"halves": BAD})
    with pytest.raises(nodestate.ConfigRejected) as caught:
        nodestate.read_config(api, keys.NAMESPACE, "halves")
    file = f"ConfigMap {keys.NAMESPACE}/{keys.MIG_CONFIGMAP} key halves"
    assert str(caught.value) == (
        f"config halves was not applied: {rejection_of(BAD, file).one_line}"
    )


def test_share_takes_the_validated_configs_and_words_a_rejection_as_validation_does() -> None:
    deployment = helm()
    good = (
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - name: nvidia.com/gpu\n        replicas: 4\n"
    )
    bad = "version: v2\n"
    raw = {"metadata": {"name": deployment.configmap}, "data": {"good": good, "bad": bad}}
    found = state.configmap_state(deployment, raw)
    where = f"{deployment.namespace}/{deployment.configmap}"
    checked = validation.check(good, f"{where}:good", state.DEVICE_PLUGIN_CONFIG)
    assert found.docs["good"] == checked.data and "good" not in found.problems
    rejection = validation.check(bad, f"{where}:bad", state.DEVICE_PLUGIN_CONFIG).rejection
    assert rejection is not None
    assert found.problems["bad"] == rejection.message


@pytest.mark.parametrize(
    "command", [("validate", "--gpu", "A30"), ("apply", "-c", "halves", "--node", "gpu-1")]
)
def test_mig_commands_word_a_rejection_as_validation_does(
    run_cli: Run, tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = tmp_path / "mig.yaml"
    path.write_text(BAD)
    result = run_cli("mig", command[0], "-f", str(path), *command[1:])
    rejected = rejection_of(BAD, str(path))
    assert result.exit_code == 1
    assert f"error: {rejected.message}" in result.stderr
    assert f"hint: {rejected.hint}" in result.stderr


def test_mig_apply_opens_a_gpu_operator_configmap_in_validation(
    run_cli: Run, tmp_path: Path
) -> None:
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom-mig"},
              "binaryData": {"config.yaml": base64.b64encode(GOOD.encode()).decode()}}  # fmt: skip
    text = json.dumps(holder)
    accepted = validation.accept_mig_config(text, "cm.json", in_configmap=True)
    assert accepted.file == "cm.json:config.yaml"
    assert accepted.config.names == ("halves",)
    path = tmp_path / "cm.json"
    path.write_text(text)
    result = run_cli("mig", "validate", "-f", str(path), "--gpu", "A100-80GB")
    assert result.exit_code == 0, result.stderr
