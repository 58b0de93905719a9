// Package imageref normalises container image references the way the container runtimes
// record them, so a pod's "nginx:1.16" and a node's "docker.io/library/nginx:1.16" are one
// key. Both the node agent (writing NodeImages) and the NodeImageLocality scheduler plugin
// (matching pod images against them) normalise through here, so the two sides cannot drift.
package imageref

import (
	"fmt"

	"github.com/distribution/reference"
)

// Ref is a normalised image reference.
type Ref struct {
	// Name is the fully-qualified repository: docker.io/library/nginx, registry:5000/team/app.
	Name string
	// Tag is the tag, "latest" when the reference had neither tag nor digest, "" when it had
	// only a digest.
	Tag string
	// Digest is the content digest (sha256:...), "" when the reference had none.
	Digest string
}

// Normalize parses ref as a container runtime would: a missing registry becomes docker.io,
// a single-component Docker Hub name gets library/, a missing tag becomes latest unless a
// digest pins the image. Uppercase repository names, 64-hex names, malformed digests and
// anything else the distribution grammar refuses are errors.
func Normalize(ref string) (Ref, error) {
	if ref == "" {
		return Ref{}, fmt.Errorf("empty image reference")
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Ref{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	named = reference.TagNameOnly(named)
	r := Ref{Name: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r, nil
}

// Tagged is name:tag, or "" when the reference has no tag.
func (r Ref) Tagged() string {
	if r.Tag == "" {
		return ""
	}
	return r.Name + ":" + r.Tag
}

// Digested is name@digest, or "" when the reference has no digest.
func (r Ref) Digested() string {
	if r.Digest == "" {
		return ""
	}
	return r.Name + "@" + r.Digest
}

// String is the full normalised reference: name:tag, name@digest or name:tag@digest.
func (r Ref) String() string {
	s := r.Name
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Keys are the strings under which a node inventory lists this image: its digest form when it
// has a digest (the digest identifies the content, so a tag that moved does not match), else
// its tag form. A tag+digest reference therefore matches by digest only, as the runtime pulls it.
func (r Ref) Keys() []string {
	if r.Digest != "" {
		return []string{r.Digested()}
	}
	return []string{r.Tagged()}
}
