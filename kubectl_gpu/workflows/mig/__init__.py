"""`kubectl gpu mig apply`, `mig status` and `mig recover`: MIG requests handed to the nodes.

Owns the I/O of a MIG change, one noun per module: `targets` resolves the nodes and their
GPUs, `strategy` the device plugin's MIG strategy, `checks` refuses before the first write,
`store` writes the config and the request label, `waits` follows each node to a final state,
`apply` runs it all in order (`request` in, `results` out, `report` as documents), `stop`
tells what an interruption left; `status` reads where each node stands, `nodemig` what
`kubectl_gpu.mig.stuck` judges, `silence` why an actuator did not answer, `recover` brings
a stuck node back. Must not decide whether a config fits or a node is stuck (kubectl_gpu.mig
does), render (the CLI does) or talk to NVML (the node agent does). `status`, `nodemig`,
`targets`, `strategy` and `silence` never write (an import-linter contract keeps it so).
"""
