"""Harness tests: the node-side stand-ins (NVML, kubelet files and sockets, the simulated
cluster's device plugin, GFD, operator and DRA driver) tested on their own, the simulated
cluster on the real control plane."""
