"""The test kit: the world the tests, the benchmarks and `make demo` run the product in (test
code only; nothing here ships, and the product never imports it).

Four floors, each importing only those below it (import-linter's `kit-floors` contract in
setup.cfg; docs/architecture.md, "The test world"):

- `cluster/`: `SimCluster`, simulated GPU nodes on a real control plane, wired up, with the
  stand-ins of what NVIDIA's GPU Operator runs (the operator, its MIG manager, dcgm-exporter)
  and `python -m tests.kit.cluster` for the demo;
- `node/`: one simulated GPU node: the NVML library and its state (`libnvml/`), the kubelet
  stand-in (`kubelet/`, the simulated kubelet's admission, allocation and pod lives), the
  node's sandbox and the programs that run in it (NVIDIA's device plugin, GFD and DRA kubelet
  plugin, NFD's master, the agent, nvidia-smi);
- `plane/`: Kubernetes' own control plane as processes (etcd, kube-apiserver, controllers,
  KWOK), its ports, credentials and keeper, the store the kit writes with and its change loop,
  the network namespaces its nodes live in, the session's shared plane, the static plane and
  NVIDIA's Helm chart on it, the fault proxy;
- `kube/`: what the tests say to and about Kubernetes whichever server answers: object
  builders (NVIDIA's three deployments among them), `ApiError`, the kubectl runner, and
  where each program scripts/gobins.py builds lies (`builds`, the one lookup every floor uses).

The kit imports nothing of `kubectl_gpu` but the kubelet's generated gRPC stubs; it runs the
agent as a process, as a DaemonSet would (the `kit-alone` contract). Its own tests are in
tests/harness/.
"""
