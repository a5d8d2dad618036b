"""What each pod actually uses of the GPUs it holds (`kubectl gpu top`), as plain data.

Owns the readings the agent takes (NVML per GPU, MIG device and process), finding a host
process's pod in its cgroup path, the versioned `/v1/usage` document the agent serves,
the limit each sharing form puts on a pod, joining all of it into `top`'s rows, reading
dcgm-exporter's Prometheus text, and the bounded ring of samples behind `top --idle`.
Must not read or send anything, or look at a clock. Pure: standard library only.
"""
