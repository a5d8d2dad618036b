//go:build tools

// Package tools pins NVIDIA's device plugin (and GFD, the same module) for scripts/gobins.py.
package tools

import (
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
)
