//go:build tools

// Package tools pins controller-gen, which hack/generate.sh runs to write the API's deepcopy
// functions and CRD YAML. Its own module keeps controller-tools' dependency graph out of Berth's.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
