//go:build tools

// Package tools pins the helm CLI (`make tools` → bin/helm), used to lint charts/berth.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
