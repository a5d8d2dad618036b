"""One simulated GPU node, below the cluster (test code only).

The NVML library and the node's GPU state file (`libnvml/`: the C library
libnvidia-ml.so.1 from `libnvml/c`, and the in-process stand-in behind pynvml); the kubelet
stand-in (`kubelet/`: its checkpoint and PodResources server; `devicemanager.py`,
`dramanager.py` and `deviceallocation.py`: its device-plugin and DRA gRPC, stubs in `_proto/`
from `proto/`; `admission.py`, `allocation.py`, `podlifecycle.py`, `podstatus.py`,
`events.py`: what the simulated kubelet does with a pod); the container runtime's view of GPU
processes (`workloads.py`, `cgroups.py`); the node's sandbox (`sandbox.py`) and what runs in it:
NVIDIA's device plugin (`nvidiaplugin.py`), GFD (`nvidiagfd.py`), DRA kubelet plugin
(`draplugin.py`), NFD's master (`nfdmaster.py`), the real node agent (`agent.py`, `agents.py`)
and `nvidia-smi` (`smi.py`), with their pods' set-up (`programs.py`, `podsetup.py`). Must not
import the cluster floor. See docs/simulated-node.md."""
