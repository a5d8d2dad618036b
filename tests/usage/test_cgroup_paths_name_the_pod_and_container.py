"""`/proc/<pid>/cgroup` text → the pod UID and container ID kubelet put in the path, for the
cgroupfs and systemd drivers, cgroup v1 and v2, containerd, CRI-O and Docker; anything else
is in no pod. The input is bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubectl_gpu.usage import cgroups
from kubectl_gpu.usage.cgroups import PodCgroup

UID = "7f9c2d1e-4b3a-4c5d-8e6f-0a1b2c3d4e5f"
SLICE_UID = UID.replace("-", "_")
CID = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "text",
    [
        # cgroup v2, systemd driver, containerd
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SLICE_UID}.slice/cri-containerd-{CID}.scope\n",
        # guaranteed QoS has no QoS slice
        f"0::/kubepods.slice/kubepods-pod{SLICE_UID}.slice/cri-containerd-{CID}.scope\n",
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SLICE_UID}.slice/crio-{CID}.scope\n",
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SLICE_UID}.slice/docker-{CID}.scope\n",
        # cgroupfs driver, v2 and v1
        f"0::/kubepods/burstable/pod{UID}/{CID}\n",
        f"0::/kubepods/pod{UID}/{CID}\n",
        f"12:memory:/kubepods/besteffort/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CID}\n",
        # v1 with systemd, the name=systemd hierarchy first
        f"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SLICE_UID}.slice/cri-containerd-{CID}.scope\n",
        # kind / nested: under a prefix
        f"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{SLICE_UID}.slice/cri-containerd-{CID}.scope\n",
        f"0::/docker/{'f' * 64}/kubepods/burstable/pod{UID}/{CID}\n",
    ],
)
def test_every_driver_and_runtime_names_the_pod_and_container(text: str) -> None:
    assert cgroups.parse(text) == PodCgroup(UID, CID)


def test_a_process_in_the_pod_but_no_container_has_only_the_pod() -> None:
    text = f"0::/kubepods.slice/kubepods-pod{SLICE_UID}.slice/crio-conmon-{CID}.scope\n"
    assert cgroups.parse(text) == PodCgroup(UID, None)


def test_a_static_pods_hash_uid_is_kept_as_it_is() -> None:
    text = f"0::/kubepods/burstable/pod{'ab' * 16}/{CID}\n"
    assert cgroups.parse(text) == PodCgroup("ab" * 16, CID)


@pytest.mark.parametrize(
    "text",
    [
        "0::/system.slice/containerd.service\n",
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/\n",
        f"0::/docker/{CID}\n",  # a container, but no pod
        f"0::/pod{UID}/{CID}\n",  # "pod…" outside kubepods
        f"0::/kubepods/burstable/pod{UID[:-2]}/{CID}\n",  # a UID too short
        "",
        "not a cgroup file at all",
    ],
)
def test_processes_outside_kubepods_are_in_no_pod(text: str) -> None:
    assert cgroups.parse(text) is None


def test_the_v2_line_wins_over_v1_lines() -> None:
    other = "11111111-2222-3333-4444-555555555555"
    text = f"4:memory:/kubepods/pod{other}/{CID}\n0::/kubepods/pod{UID}/{CID}\n"
    assert cgroups.parse(text) == PodCgroup(UID, CID)


def test_input_beyond_the_bound_is_not_read() -> None:
    text = "x" * cgroups.MAX_BYTES + f"\n0::/kubepods/pod{UID}/{CID}\n"
    assert cgroups.parse(text) is None


@given(st.text(max_size=2000))
def test_any_text_gives_a_pod_or_none_never_an_error(text: str) -> None:
    found = cgroups.parse(text)
    assert found is None or len(found.pod_uid) in (32, 36)
