package imagelocality

import (
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/berth-sched/berth/pkg/imageref"
)

// Thresholds of the in-tree ImageLocality score (pkg/scheduler/framework/plugins/imagelocality),
// kept so that scores stay comparable with it.
const (
	mib                   int64 = 1024 * 1024
	minThreshold          int64 = 23 * mib
	maxContainerThreshold int64 = 1000 * mib
	// maxImageSize bounds one image's size (1 TiB): a hand-edited sizeBytes of 9e18 must not
	// overflow the per-node sum. Bigger sizes are clamped and counted as invalid.
	maxImageSize int64 = 1 << 40
)

// keyOf is the inventory key a pod's image reference matches: name@digest for a digest pin,
// else name:tag, both normalised; a bare image id (sha256:<64 hex> or 64 hex) matches the
// inventory's id. ok is false for references no runtime would accept.
func keyOf(ref string) (string, bool) {
	if id, ok := imageID(ref); ok {
		return id, true
	}
	r, err := imageref.Normalize(ref)
	if err != nil {
		return "", false
	}
	return r.Keys()[0], true
}

// imageID recognises a content id, the form runtimes accept in place of a name.
func imageID(ref string) (string, bool) {
	h := strings.TrimPrefix(ref, "sha256:")
	if len(h) != 64 {
		return "", false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return "sha256:" + h, true
}

// podImages are a pod's image references in the in-tree plugin's sense: one per init
// container, regular container and image volume (a duplicate counts once per use).
type podImages struct {
	// keys are the distinct inventory keys with how many uses each has.
	keys []keyUse
	// count is the number of uses, the formula's imageCount (including unmatched ones).
	count int
	// invalid are references that could not be normalised (they score nothing).
	invalid []string
}

type keyUse struct {
	key  string
	uses int
}

func imagesOf(pod *v1.Pod) podImages {
	var pi podImages
	uses := map[string]int{}
	add := func(ref string) {
		pi.count++
		k, ok := keyOf(ref)
		if !ok {
			pi.invalid = append(pi.invalid, ref)
			return
		}
		uses[k]++
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].Image)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].Image)
	}
	for i := range pod.Spec.Volumes {
		if img := pod.Spec.Volumes[i].Image; img != nil {
			add(img.Reference)
		}
	}
	pi.keys = make([]keyUse, 0, len(uses))
	for k, n := range uses {
		pi.keys = append(pi.keys, keyUse{key: k, uses: n})
	}
	sort.Slice(pi.keys, func(i, j int) bool { return pi.keys[i].key < pi.keys[j].key })
	return pi
}

// inventory is one node's images: key (name:tag, name@digest, sha256:id) → size in bytes.
type inventory map[string]int64

func (inv inventory) put(key string, size int64) {
	if old, ok := inv[key]; !ok || size > old {
		inv[key] = size
	}
}

// sanitizeSize clamps a size into [0, maxImageSize]; ok is false when it had to.
func sanitizeSize(s int64) (int64, bool) {
	switch {
	case s < 0:
		return 0, false
	case s > maxImageSize:
		return maxImageSize, false
	}
	return s, true
}

// parseNodeImages reads spec.images of a NodeImages object entry by entry, so one bad entry
// (a hand edit, an agent bug) loses only itself: names that do not normalise are skipped,
// sizes out of range are clamped, and each is counted in bad. Tags and digests are normalised
// again rather than trusted: a key that differs from the pod side would never match.
func parseNodeImages(obj map[string]any, nc *nameCache) (inv inventory, bad int) {
	inv = inventory{}
	// why NoCopy: the deep copy of NestedSlice costs a full copy of a 5000-image list and
	// panics on values that are not JSON types.
	raw, found, err := unstructured.NestedFieldNoCopy(obj, "spec", "images")
	if err != nil {
		return inv, 1
	}
	if !found || raw == nil {
		return inv, 0
	}
	images, ok := raw.([]any)
	if !ok {
		return inv, 1
	}
	for _, it := range images {
		m, ok := it.(map[string]any)
		if !ok {
			bad++
			continue
		}
		size, okSize := sizeOf(m["sizeBytes"])
		if !okSize {
			bad++
		}
		var keys []string
		if id, ok := m["id"].(string); ok {
			if k, ok := imageID(id); ok {
				keys = append(keys, k)
			}
		}
		for _, field := range []string{"tags", "digests"} {
			raw, ok := m[field]
			if !ok || raw == nil {
				continue
			}
			list, ok := raw.([]any)
			if !ok {
				bad++
				continue
			}
			for _, n := range list {
				s, ok := n.(string)
				if !ok {
					bad++
					continue
				}
				ks, ok := nc.keys(s)
				if !ok {
					bad++
					continue
				}
				keys = append(keys, ks...)
			}
		}
		for _, k := range keys {
			inv.put(k, size)
		}
	}
	return inv, bad
}

func sizeOf(v any) (int64, bool) {
	var s int64
	switch n := v.(type) {
	case int64:
		s = n
	case int:
		s = int64(n)
	case int32:
		s = int64(n)
	case float64:
		if n != n || n > float64(maxImageSize) {
			return maxImageSize, false
		}
		s = int64(n)
	case nil:
		return 0, true
	default:
		return 0, false
	}
	return sanitizeSize(s)
}

// namesToKeys turns one runtime name (a tag or a digest reference) into the keys it answers
// to. A tag+digest name answers to both.
func namesToKeys(name string) ([]string, bool) {
	r, err := imageref.Normalize(name)
	if err != nil {
		return nil, false
	}
	var out []string
	if t := r.Tagged(); t != "" {
		out = append(out, t)
	}
	if d := r.Digested(); d != "" {
		out = append(out, d)
	}
	return out, true
}

// parseNodeStatus reads kubelet's node.status.images (names: repo digests then repo tags, as
// the runtime reports them, at most five per image).
func parseNodeStatus(images []v1.ContainerImage, nc *nameCache) (inv inventory, bad int) {
	inv = inventory{}
	for _, img := range images {
		size, ok := sanitizeSize(img.SizeBytes)
		if !ok {
			bad++
		}
		for _, n := range img.Names {
			ks, ok := nc.keys(n)
			if !ok {
				bad++
				continue
			}
			for _, k := range ks {
				inv.put(k, size)
			}
		}
	}
	return inv, bad
}

// nameCache memoises namesToKeys: the same runtime names recur on every node, and
// normalising is the dominant cost of reading an inventory (the package's benchmarks measure
// it). It is bounded by
// dropping everything when full; failures are cached too (a garbage name stays garbage).
type nameCache struct {
	mu sync.Mutex
	m  map[string]cachedKeys
}

type cachedKeys struct {
	keys []string
	ok   bool
}

const nameCacheMax = 1 << 17

func newNameCache() *nameCache { return &nameCache{m: map[string]cachedKeys{}} }

func (c *nameCache) keys(name string) ([]string, bool) {
	if c == nil {
		return namesToKeys(name)
	}
	c.mu.Lock()
	v, hit := c.m[name]
	c.mu.Unlock()
	if hit {
		return v.keys, v.ok
	}
	ks, ok := namesToKeys(name)
	c.mu.Lock()
	if len(c.m) >= nameCacheMax {
		c.m = map[string]cachedKeys{}
	}
	c.m[name] = cachedKeys{keys: ks, ok: ok}
	c.mu.Unlock()
	return ks, ok
}
