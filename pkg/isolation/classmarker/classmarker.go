// Package classmarker is the contract between the writers and readers of the autoscaler-visible
// isolation marker (issue 37): the node label key, the effective-class strings and the one
// encoding of an effective class into a label value. It imports neither the webhook, nor the
// InstanceIsolation plugin, nor the operator, so every side (webhook terms, the operator's
// writer, kubectl berth, the e2e suites) computes the same value from the same function.
package classmarker

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Key is the node label naming the one effective class a pool node holds. Kubelets cannot set
// labels under node-restriction.kubernetes.io/ on their own Node (NodeRestriction admission),
// so a node cannot claim a class. Karpenter v1.14.1 restricts only its own karpenter.sh domain
// in NodePool requirements (pkg/apis/v1/labels.go, RestrictedLabelDomains; older releases
// restricted kubernetes.io with node-restriction.kubernetes.io as an exception), so a NodePool
// may require the key with Exists and Karpenter sets the pod's required value on the NodeClaim.
const Key = "node-restriction.kubernetes.io/berth-instance-class"

// sharedSuffix marks a class shared through an InstanceClass (the plugin's and the refusals'
// form).
const sharedSuffix = " (shared)"

// maxLen is the longest label value.
const maxLen = 63

// hashedPrefix starts the hashed form: "H" is not a namespace name (uppercase), so "H_…" never
// equals an owned "N_V", and no readable shared form contains "_".
const hashedPrefix = "H_"

// NamespaceClass is the effective class of value owned by namespace ns alone: "ns/value".
func NamespaceClass(ns, value string) string { return ns + "/" + value }

// SharedClass is the effective class of value shared through an InstanceClass: "value (shared)".
func SharedClass(value string) string { return value + sharedSuffix }

// Effective is the effective class of value carried by a pod of namespace ns: shared when an
// InstanceClass named value lists ns (shared=true), else the namespace's own.
func Effective(ns, value string, shared bool) string {
	if shared {
		return SharedClass(value)
	}
	return NamespaceClass(ns, value)
}

// MarkerValue is the marker label value of an effective class (NamespaceClass or SharedClass
// form). Label values allow [A-Za-z0-9._-], at most 63, alphanumeric at both ends; namespace
// names are lowercase DNS labels (no "_", ".", uppercase):
//   - owned "N/V" with len(N)+1+len(V) <= 63: "N_V" (unambiguous: split at the first "_", N
//     has none);
//   - shared "V (shared)" with no "_" in V: "V" (no "_", so never an owned form);
//   - anything else: "H_" + the first 40 hex digits of sha256(effective class).
//
// Two different effective classes never get the same value (short of a sha256 prefix
// collision between two long ones).
func MarkerValue(effective string) string {
	if v, ok := strings.CutSuffix(effective, sharedSuffix); ok {
		if v != "" && !strings.Contains(v, "_") && len(v) <= maxLen {
			return v
		}
		return hashed(effective)
	}
	if ns, v, ok := strings.Cut(effective, "/"); ok && ns != "" && v != "" && len(ns)+1+len(v) <= maxLen && !strings.Contains(ns, "_") {
		return ns + "_" + v
	}
	return hashed(effective)
}

func hashed(effective string) string {
	sum := sha256.Sum256([]byte(effective))
	return hashedPrefix + hex.EncodeToString(sum[:])[:40]
}

// EffectiveFromMarker is the effective class a readable marker value names, for messages
// (kubectl berth, events); ok is false for a hashed value, which names no class readably.
func EffectiveFromMarker(value string) (effective string, ok bool) {
	if strings.HasPrefix(value, hashedPrefix) || value == "" {
		return "", false
	}
	if ns, v, found := strings.Cut(value, "_"); found {
		return NamespaceClass(ns, v), true
	}
	return SharedClass(value), true
}
