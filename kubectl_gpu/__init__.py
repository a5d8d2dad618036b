"""kubectl-gpu: share, partition and map NVIDIA GPUs on Kubernetes."""

__version__ = "0.1.0"
