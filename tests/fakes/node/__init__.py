"""What runs on a simulated GPU node besides the kubelet (test code only): the real node agent,
unmodified, over the node's driver root (`agent.py`), and `nvidia-smi` (`smi.py`), both working
on the node's shared GPU state file (tests/fakes/libnvml/statefile.py) that the node's
libnvidia-ml.so.1 (tests/fakes/libnvml/c) serves."""
