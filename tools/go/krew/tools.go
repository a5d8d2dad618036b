//go:build tools

// Package tools pins krew, the kubectl plugin manager the packaging tests install with.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
)
