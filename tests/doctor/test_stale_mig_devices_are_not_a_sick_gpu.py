"""After a plugin with MIG strategy `none` replaced one with `mixed` (as `uninstall` may leave
it), kubelet keeps the MIG devices in capacity with none allocatable while whole GPUs are
advertised: doctor warns that the plugin stopped advertising MIG devices (and what that means
if the GPUs are still MIG-enabled), and never tells the user to replace a healthy GPU."""

from __future__ import annotations

from kubectl_gpu.doctor import facts, health

MIG = "nvidia.com/mig-3g.40gb"


def node(capacity: dict[str, str], allocatable: dict[str, str]) -> facts.Node:
    return facts.node_from_dict(
        {
            "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": allocatable},
        }
    )


def test_stale_mig_devices_beside_whole_gpus_are_one_warning_not_a_sick_gpu() -> None:
    stale = node({MIG: "2", "nvidia.com/gpu": "1"}, {MIG: "0", "nvidia.com/gpu": "1"})

    found = health.check([stale], [], None)

    assert not [d for d in found if "unhealthy" in d.message]
    [warning] = [d for d in found if MIG in d.message]
    assert warning.severity == "warning"
    assert "stopped advertising MIG devices" in warning.message
    assert "all-disabled" in warning.fix


def test_a_gpu_the_plugin_took_out_is_still_unhealthy() -> None:
    sick = node({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "1"})
    [unhealthy] = [d for d in health.check([sick], [], None) if "unhealthy" in d.message]
    assert unhealthy.severity == "error"
