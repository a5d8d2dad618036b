"""`kubectl gpu install`, `uninstall` and `status`: the bundle on a cluster.

Owns the I/O of the bundle, one noun per module: `objects` (where each object lives, reading
it, which fields are ours), `apply` (kubectl-apply semantics), `facts` (what pre-flight needs),
`install` (replace, apply, prune), `replaced` (a plugin `--replace-plugin` deleted, kept and
given back), `uninstall` and `status` (each part there, Ready and current). Must not render
manifests (kubectl_gpu.bundle does) nor choose options (kubectl_gpu.preflight does). `status`
and `facts` never write (an import-linter contract keeps it so).
"""
