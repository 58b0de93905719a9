//go:build tools

// Package tools pins krew's own manifest validator (validate-krew-manifest, the check krew's
// plugin index runs on every submission), which `make krew` runs on the manifest it generates
// for kubectl-berth. Its own module keeps krew's dependency graph out of Berth's.
package tools

import _ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
