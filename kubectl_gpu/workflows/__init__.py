"""Workflows: multi-step operations that read the cluster, ask the domain, then write.

Owns orchestration only, through `kubectl_gpu.cluster.Api`: the order of reads and writes,
retries on conflicts, waits with injected time, and saying exactly what state a failure left.
One subpackage per noun (`share`, `mig`, `install`, `doctor`); at the top, the steps several
of them share (`drain`, `preview`, `waiting`, `progress`, and `comeback`: whether the node
side's pods a change deletes come back) and the GPU map's two sides (`map`
reads it, `reports` publishes a node's part). Must not decide (the domain's planners do),
render (the CLI does) or import `kubernetes` (cluster.py does).
"""
