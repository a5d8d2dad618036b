//go:build tools

// Package tools pins NVIDIA's GPU Feature Discovery (cmd/gpu-feature-discovery of the device
// plugin's module, at the device plugin's pin) for scripts/gobins.py.
package tools

import (
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery"
)
