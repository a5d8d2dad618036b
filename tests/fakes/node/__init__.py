"""What runs on a simulated GPU node besides the kubelet (test code only): the node agent's
launcher (`agent.py`, `python -m tests.fakes.node.agent`) and `nvidia-smi` (`smi.py`), both
working on the node's shared GPU state file (tests/fakes/libnvml/statefile.py)."""
