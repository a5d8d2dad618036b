//go:build tools

// Package tools pins Node Feature Discovery's master (sigs.k8s.io/node-feature-discovery) for
// scripts/gobins.py: it turns the NodeFeature objects GFD writes into node labels.
package tools

import (
	_ "sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
)
