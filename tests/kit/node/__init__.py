"""What runs on a simulated GPU node besides the kubelet (test code only): the real node agent,
unmodified, over the node's driver root (`agent.py`), and `nvidia-smi` (`smi.py`), both working
on the node's shared GPU state file (tests/kit/node/libnvml/statefile.py) that the node's
libnvidia-ml.so.1 (tests/kit/node/libnvml/c) serves; NVIDIA's own device plugin in the node's
sandbox (`nvidiaplugin.py`, `sandbox.py`) and the kubelet's device manager it registers with
over the kubelet's gRPC (`devicemanager.py`; stubs in `_proto/`, from `proto/`). See
docs/simulated-node.md."""
