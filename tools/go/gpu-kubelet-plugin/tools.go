//go:build tools

// Package tools pins NVIDIA's DRA kubelet plugin (gpu-kubelet-plugin) for scripts/gobins.py.
package tools

import (
	_ "sigs.k8s.io/dra-driver-nvidia-gpu/cmd/gpu-kubelet-plugin"
)
