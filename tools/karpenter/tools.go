//go:build tools

// Package tools pins Karpenter's KWOK provider, the autoscaler the local cluster runs on request.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
