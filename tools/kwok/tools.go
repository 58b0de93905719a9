//go:build tools

// Package tools pins KWOK, which simulates nodes for the local cluster.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
