"""Workflows: multi-step operations that read the cluster, ask the domain, then write.

Owns orchestration only, through `kubectl_gpu.cluster.Api` (one module per verb group, e.g.
`share`): the order of reads and writes, retries on conflicts, waits with injected time, and
saying exactly what state a failure left. Must not decide (the domain's planners do), render
(the CLI does) or import `kubernetes` (cluster.py does).
"""
