// Package profiles turns Security Profiles Operator (SPO) SeccompProfile and ProfileBinding
// objects, in any API shape SPO has shipped, into the small typed views SySched needs. It never
// trusts its input: objects come from a cluster API that may hold hand-written or corrupted data.
package profiles

import (
	"fmt"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Group is the API group of every SPO resource.
const Group = "security-profiles-operator.x-k8s.io"

// Limits that keep one malformed object from costing unbounded memory or CPU in the scheduler.
// Linux has < 500 syscalls; generous bounds still reject obvious garbage.
const (
	MaxSyscallEntries = 1024
	MaxNamesTotal     = 4096
	MaxNameLength     = 64
)

// Seccomp actions that let a syscall through (LOG allows it and only records it).
const (
	ActAllow = "SCMP_ACT_ALLOW"
	ActLog   = "SCMP_ACT_LOG"
)

// Key identifies a SeccompProfile. Namespace is empty for the cluster-scoped shape (SPO >= v0.9).
type Key struct {
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Profile is the subset of a SeccompProfile SySched reads.
type Profile struct {
	Key Key
	// Syscalls are the names allowed or logged by this object alone (bases not included),
	// de-duplicated, in first-seen order.
	Syscalls []string
	// BaseProfileName is spec.baseProfileName verbatim ("" when absent).
	BaseProfileName string
	// AllowByDefault marks deny-list profiles (defaultAction ALLOW or LOG): every syscall not
	// listed is permitted, so for ExS purposes the profile exposes the full set.
	AllowByDefault bool
	// LocalhostProfile is status.localhostProfile, the path pods put in their securityContext.
	LocalhostProfile string
	// ID is how SPO's SecurityProfileNodeStatus objects name this profile (their label
	// spo.x-k8s.io/profile-id): the profile's own label of that name, which SPO sets, or else
	// SPO's default, "SeccompProfile-<name>".
	ID string
}

// ProfileIDLabel is SPO's label naming a profile on it and on its per-node status objects.
const ProfileIDLabel = "spo.x-k8s.io/profile-id"

// ParseProfile reads an unstructured SeccompProfile. It returns the usable part of the object
// together with every problem found; a profile is still returned when only parts are malformed,
// because a partially readable profile scores better than treating it as missing. A nil profile
// means the object cannot be identified (no name).
func ParseProfile(obj map[string]interface{}) (*Profile, []error) {
	p, err := profileMeta(obj)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	spec, ok := obj["spec"].(map[string]interface{})
	if !ok {
		if obj["spec"] != nil {
			errs = append(errs, fmt.Errorf("spec is %T, want object", obj["spec"]))
		}
		return p, errs
	}
	if v, present := spec["baseProfileName"]; present && v != nil {
		s, ok := v.(string)
		if !ok {
			errs = append(errs, fmt.Errorf("spec.baseProfileName is %T, want string", v))
		}
		p.BaseProfileName = s
	}
	if da, ok := spec["defaultAction"].(string); ok && (da == ActAllow || da == ActLog) {
		p.AllowByDefault = true
	}
	raw, present := spec["syscalls"]
	if !present || raw == nil {
		return p, errs
	}
	entries, ok := raw.([]interface{})
	if !ok {
		return p, append(errs, fmt.Errorf("spec.syscalls is %T, want list", raw))
	}
	if len(entries) > MaxSyscallEntries {
		errs = append(errs, fmt.Errorf("spec.syscalls has %d entries, only the first %d are read", len(entries), MaxSyscallEntries))
		entries = entries[:MaxSyscallEntries]
	}
	return p, append(errs, p.readSyscalls(entries)...)
}

// profileMeta reads the profile's key, ID and localhost profile; a profile without a name is
// an error.
func profileMeta(obj map[string]interface{}) (*Profile, error) {
	meta, _ := obj["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("metadata.name missing or not a string")
	}
	ns, _ := meta["namespace"].(string)
	p := &Profile{Key: Key{Namespace: ns, Name: name}, ID: "SeccompProfile-" + name}
	if ls, ok := meta["labels"].(map[string]interface{}); ok {
		if id, ok := ls[ProfileIDLabel].(string); ok && id != "" {
			p.ID = id
		}
	}
	if st, ok := obj["status"].(map[string]interface{}); ok {
		p.LocalhostProfile, _ = st["localhostProfile"].(string)
	}
	return p, nil
}

// readSyscalls appends the allowed (or logged) syscall names of entries to p.Syscalls, once
// each, up to MaxNamesTotal names, and says what it skipped.
func (p *Profile) readSyscalls(entries []interface{}) []error {
	var errs []error
	seen := map[string]struct{}{}
	total := 0
	for i, e := range entries {
		entry, ok := e.(map[string]interface{})
		if !ok {
			errs = append(errs, fmt.Errorf("spec.syscalls[%d] is %T, want object", i, e))
			continue
		}
		action, _ := entry["action"].(string)
		if action != ActAllow && action != ActLog {
			continue
		}
		names, ok := entry["names"].([]interface{})
		if !ok {
			errs = append(errs, fmt.Errorf("spec.syscalls[%d].names is %T, want list", i, entry["names"]))
			continue
		}
		for j, n := range names {
			if total >= MaxNamesTotal {
				return append(errs, fmt.Errorf("more than %d syscall names, rest ignored", MaxNamesTotal))
			}
			total++
			s, err := syscallName(n, i, j)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, dup := seen[s]; dup {
				continue
			}
			seen[s] = struct{}{}
			p.Syscalls = append(p.Syscalls, s)
		}
	}
	return errs
}

// syscallName is names[j] of syscalls[i], trimmed, or why it cannot be one.
func syscallName(n interface{}, i, j int) (string, error) {
	s, ok := n.(string)
	s = strings.TrimSpace(s)
	switch {
	case !ok:
		return "", fmt.Errorf("spec.syscalls[%d].names[%d] is %T, want string", i, j, n)
	case s == "":
		return "", fmt.Errorf("spec.syscalls[%d].names[%d] is empty", i, j)
	case len(s) > MaxNameLength:
		return "", fmt.Errorf("spec.syscalls[%d].names[%d] longer than %d bytes", i, j, MaxNameLength)
	}
	return s, nil
}

// BaseKey returns the key of the profile's base in the same scope, and false when there is no
// base or it is not a cluster object (an oci:// artifact or an illegal name), which callers must
// treat as unknown content.
func (p *Profile) BaseKey() (Key, bool) {
	b := p.BaseProfileName
	if b == "" || strings.Contains(b, "://") || strings.Contains(b, "/") {
		return Key{}, false
	}
	return Key{Namespace: p.Key.Namespace, Name: b}, true
}

// HasBase reports whether spec.baseProfileName is set at all.
func (p *Profile) HasBase() bool { return p.BaseProfileName != "" }

// Binding is the subset of a ProfileBinding SySched reads.
type Binding struct {
	Namespace   string
	Name        string
	Image       string
	ProfileName string
	// Selector is spec.podSelector (SPO v1): nil matches every pod of the namespace.
	Selector labels.Selector
}

// SelectAllImages is SPO's wildcard image: the binding applies at pod level.
const SelectAllImages = "*"

// ParseBinding reads an unstructured ProfileBinding; it returns nil for bindings that do not
// bind a SeccompProfile or lack the fields SPO requires.
func ParseBinding(obj map[string]interface{}) (*Binding, error) {
	meta, _ := obj["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	spec, _ := obj["spec"].(map[string]interface{})
	ref, _ := spec["profileRef"].(map[string]interface{})
	kind, _ := ref["kind"].(string)
	if kind != "SeccompProfile" {
		return nil, nil
	}
	b := &Binding{Namespace: ns, Name: name}
	b.Image, _ = spec["image"].(string)
	b.ProfileName, _ = ref["name"].(string)
	if name == "" || b.Image == "" || b.ProfileName == "" {
		return nil, fmt.Errorf("ProfileBinding %s/%s: spec.image and spec.profileRef.name are required", ns, name)
	}
	if raw, ok := spec["podSelector"]; ok && raw != nil {
		var ls metav1.LabelSelector
		m, _ := raw.(map[string]interface{})
		err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls)
		if err == nil {
			b.Selector, err = metav1.LabelSelectorAsSelector(&ls)
		}
		if err != nil {
			// SPO skips a binding whose selector is invalid; so does SySched.
			return nil, fmt.Errorf("ProfileBinding %s/%s: spec.podSelector: %w; the binding applies to no pod", ns, name, err)
		}
	}
	return b, nil
}

// Localhost profile path layouts written by SPO into status.localhostProfile.
const operatorDir = "operator"

// KeysForPath returns the candidate profile keys, most specific first, for a Localhost profile
// path as found in a securityContext ("operator/ns/name.json", "operator/name.json") or a legacy
// annotation ("localhost/operator/..."). Callers try an exact status.localhostProfile match
// first; this is the fallback for profiles whose status is not yet filled in.
func KeysForPath(p string) []Key {
	p = strings.TrimPrefix(strings.TrimSpace(p), "localhost/")
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return nil
	}
	segs := strings.Split(p, "/")
	name := strings.TrimSuffix(segs[len(segs)-1], path.Ext(segs[len(segs)-1]))
	if name == "" {
		return nil
	}
	n := len(segs)
	switch {
	case n >= 2 && segs[n-2] == operatorDir:
		// Cluster-scoped layout (SPO >= v0.9). A namespace called "operator" would look the
		// same, so keep it as a second choice.
		return []Key{{Name: name}, {Namespace: operatorDir, Name: name}}
	case n >= 3 && segs[n-3] == operatorDir:
		return []Key{{Namespace: segs[n-2], Name: name}, {Name: name}}
	case n >= 2:
		// Not SPO's layout; upstream SySched still reads <ns>/<name>, keep that for compatibility.
		return []Key{{Namespace: segs[n-2], Name: name}, {Name: name}}
	default:
		return []Key{{Name: name}}
	}
}

// Matches reports whether the binding's podSelector selects a pod with these labels.
func (b *Binding) Matches(podLabels map[string]string) bool {
	return b.Selector == nil || b.Selector.Matches(labels.Set(podLabels))
}
