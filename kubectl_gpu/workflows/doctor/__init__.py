"""`kubectl gpu doctor`: the reads behind a diagnosis, for one pod or for the cluster.

Owns gathering facts: `diagnosis` reads the pod, its events, nodes, quotas, plugin pod and
logs, the sharing survey (through workflows.share.show) and stuck MIG changes (through
workflows.mig.nodemig); `dra` reads a pod's ResourceClaims, DeviceClasses and ResourceSlices.
Must not decide (kubectl_gpu.doctor does) and never writes: it imports no module of the share,
mig or install workflows that writes (an import-linter contract keeps it so).
"""
