package imagelocality

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	invalidRefs = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_imagelocality",
		Name:           "invalid_entries_total",
		Help:           "Image entries NodeImageLocality ignored or clamped, by source (nodeimages, nodestatus, pod): names that do not normalise, sizes out of range, malformed list items.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(invalidRefs) })
}

// Sources of an invalid entry (metric label).
const (
	sourceNodeImages = "nodeimages"
	sourceNodeStatus = "nodestatus"
	sourcePod        = "pod"
)

// Index is one plugin instance's view of which images each node holds: the NodeImages
// inventory where a node has one, kubelet's node.status.images otherwise, plus the images of
// pods recently placed on a node (their pull is under way). It is fed by informer events and
// read under a read lock; nothing in it calls the API server.
type Index struct {
	mu            sync.RWMutex
	useNodeStatus bool
	window        time.Duration
	now           func() time.Time

	nodes map[string]*nodeEntry
	// holders is the reverse of every node's effective inventory: key → node → size.
	holders map[string]map[string]int64
	// pulls are assumed pulls by pod; pulling indexes them: key → node → pods pulling it there.
	pulls   map[types.UID]*pull
	pulling map[string]map[string]int
	// nextExpiry is the earliest expiry among pulls (zero: none), so reads drop expired pulls
	// exactly when they lapse without scanning on every cycle.
	nextExpiry time.Time
	// names memoises name normalisation for inventory parsing.
	names *nameCache
}

type nodeEntry struct {
	fromCR     inventory // nil: no NodeImages object for the node
	fromStatus inventory // nil: no (non-empty) node.status.images
	effective  inventory
}

type pull struct {
	node    string
	keys    []string
	expires time.Time
}

// NewIndex returns an empty index. window is how long a placed pod's images count as present
// on its node (0: never); useNodeStatus says whether node.status.images stands in for a
// missing NodeImages. now is the clock (nil: time.Now).
func NewIndex(window time.Duration, useNodeStatus bool, now func() time.Time) *Index {
	registerMetrics()
	if now == nil {
		now = time.Now
	}
	return &Index{
		useNodeStatus: useNodeStatus, window: window, now: now,
		nodes:   map[string]*nodeEntry{},
		holders: map[string]map[string]int64{},
		pulls:   map[types.UID]*pull{},
		pulling: map[string]map[string]int{},
		names:   newNameCache(),
	}
}

// SetNodeImages records a node's NodeImages object (its unstructured content). A Stale
// inventory is used as it is: it is the last one the agent saw.
func (ix *Index) SetNodeImages(node string, obj map[string]any) {
	inv, bad := parseNodeImages(obj, ix.names)
	if bad > 0 {
		invalidRefs.WithLabelValues(sourceNodeImages).Add(float64(bad))
	}
	ix.setInventory(node, inv)
}

func (ix *Index) setInventory(node string, inv inventory) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := ix.entryLocked(node)
	e.fromCR = inv
	ix.refreshLocked(node, e)
}

// DeleteNodeImages forgets a node's NodeImages; node.status.images takes over if enabled.
func (ix *Index) DeleteNodeImages(node string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.nodes[node]; ok {
		e.fromCR = nil
		ix.refreshLocked(node, e)
	}
}

// SetNodeStatus records the images of a node's status.
func (ix *Index) SetNodeStatus(node string, inv inventory) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := ix.entryLocked(node)
	if len(inv) == 0 {
		inv = nil
	}
	e.fromStatus = inv
	ix.refreshLocked(node, e)
}

// DeleteNode forgets a node's status images (its NodeImages, if any, stays until deleted; the
// snapshot no longer lists the node, so it is not counted either way).
func (ix *Index) DeleteNode(node string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.nodes[node]; ok {
		e.fromStatus = nil
		ix.refreshLocked(node, e)
	}
}

func (ix *Index) entryLocked(node string) *nodeEntry {
	e, ok := ix.nodes[node]
	if !ok {
		e = &nodeEntry{}
		ix.nodes[node] = e
	}
	return e
}

// refreshLocked swaps the node's contribution to holders for its current effective inventory.
func (ix *Index) refreshLocked(node string, e *nodeEntry) {
	next := e.fromCR
	if next == nil && ix.useNodeStatus {
		next = e.fromStatus
	}
	// why a diff: an agent update usually changes a few images out of hundreds; removing
	// and re-adding every key would churn one small map per key.
	for k := range e.effective {
		if _, kept := next[k]; kept {
			continue
		}
		if m := ix.holders[k]; m != nil {
			delete(m, node)
			if len(m) == 0 {
				delete(ix.holders, k)
			}
		}
	}
	for k, size := range next {
		m := ix.holders[k]
		if m == nil {
			m = map[string]int64{}
			ix.holders[k] = m
		}
		m[node] = size
	}
	e.effective = next
	if e.fromCR == nil && e.fromStatus == nil {
		delete(ix.nodes, node)
	}
}

// AssumePulled counts keys as present on node until placed+window (placed is when the pod
// was reserved or bound). A pod is recorded once; a later call for it on another node moves it.
func (ix *Index) AssumePulled(uid types.UID, node string, keys []string, placed time.Time) {
	if ix.window <= 0 || len(keys) == 0 {
		return
	}
	expires := placed.Add(ix.window)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !expires.After(ix.now()) {
		return
	}
	if p, ok := ix.pulls[uid]; ok {
		if p.node == node {
			return
		}
		ix.dropPullLocked(uid, p)
	}
	ix.pulls[uid] = &pull{node: node, keys: keys, expires: expires}
	for _, k := range keys {
		m := ix.pulling[k]
		if m == nil {
			m = map[string]int{}
			ix.pulling[k] = m
		}
		m[node]++
	}
	if ix.nextExpiry.IsZero() || expires.Before(ix.nextExpiry) {
		ix.nextExpiry = expires
	}
}

// Forget drops the pod's assumed pull; node "" drops it wherever it is, otherwise only there
// (Unreserve of a placement the pod no longer has must not drop a newer one).
func (ix *Index) Forget(uid types.UID, node string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if p, ok := ix.pulls[uid]; ok && (node == "" || p.node == node) {
		ix.dropPullLocked(uid, p)
	}
}

// HasPull reports whether the pod has an assumed pull recorded.
func (ix *Index) HasPull(uid types.UID) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.pulls[uid]
	return ok
}

func (ix *Index) dropPullLocked(uid types.UID, p *pull) {
	delete(ix.pulls, uid)
	for _, k := range p.keys {
		if m := ix.pulling[k]; m != nil {
			if m[p.node]--; m[p.node] <= 0 {
				delete(m, p.node)
			}
			if len(m) == 0 {
				delete(ix.pulling, k)
			}
		}
	}
}

// expireLocked drops every lapsed pull when the earliest one has lapsed.
func (ix *Index) expireLocked(now time.Time) {
	if ix.nextExpiry.IsZero() || now.Before(ix.nextExpiry) {
		return
	}
	ix.nextExpiry = time.Time{}
	for uid, p := range ix.pulls {
		if !now.Before(p.expires) {
			ix.dropPullLocked(uid, p)
			continue
		}
		if ix.nextExpiry.IsZero() || p.expires.Before(ix.nextExpiry) {
			ix.nextExpiry = p.expires
		}
	}
}

// NodeSet answers whether a node is part of the scheduling snapshot.
type NodeSet interface {
	Has(node string) bool
	Len() int
}

// Sums is the per-snapshot precomputation for one pod: the in-tree sum of spread-scaled
// image sizes for every node that holds at least one of the pod's images. Nodes absent from
// Sums hold none (sum 0).
type Sums struct {
	ByNode     map[string]int64
	ImageCount int
	// Keys are the pod's distinct inventory keys (what Reserve records as pulled).
	Keys []string
	// Invalid are the pod's image references that could not be normalised.
	Invalid []string
}

// Compute evaluates, once for the whole snapshot, sum(n) = Σ over the pod's image uses present
// on n of size_n(image) × NumNodes(image) / len(snapshot), where NumNodes counts snapshot nodes
// holding the image (inventory or assumed pull). Each use contributes its truncated value, as
// in-tree. A node holding an image only through an assumed pull is credited with the largest
// size any inventory reports for it (0 when none knows it: nothing to gain by guessing).
func (ix *Index) Compute(pi podImages, nodes NodeSet) Sums {
	s := Sums{ImageCount: pi.count, Invalid: pi.invalid}
	total := nodes.Len()
	for _, ku := range pi.keys {
		s.Keys = append(s.Keys, ku.key)
	}
	if total == 0 || len(pi.keys) == 0 {
		return s
	}
	now := ix.now()
	ix.mu.RLock()
	lapsed := !ix.nextExpiry.IsZero() && !now.Before(ix.nextExpiry)
	ix.mu.RUnlock()
	if lapsed {
		ix.mu.Lock()
		ix.expireLocked(now)
		ix.mu.Unlock()
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var onlyPulled []string
	for _, ku := range pi.keys {
		hs := ix.holders[ku.key]
		ps := ix.pulling[ku.key]
		if len(hs) == 0 && len(ps) == 0 {
			continue
		}
		numNodes := 0
		var maxSize int64
		for n, size := range hs {
			if size > maxSize {
				maxSize = size
			}
			if nodes.Has(n) {
				numNodes++
			}
		}
		onlyPulled = onlyPulled[:0]
		for n := range ps {
			if _, held := hs[n]; !held && nodes.Has(n) {
				numNodes++
				onlyPulled = append(onlyPulled, n)
			}
		}
		if numNodes == 0 {
			continue
		}
		spread := float64(numNodes) / float64(total)
		if s.ByNode == nil {
			s.ByNode = map[string]int64{}
		}
		for n, size := range hs {
			if nodes.Has(n) {
				s.ByNode[n] += int64(ku.uses) * int64(float64(size)*spread)
			}
		}
		for _, n := range onlyPulled {
			s.ByNode[n] += int64(ku.uses) * int64(float64(maxSize)*spread)
		}
	}
	return s
}

// Priority is the in-tree ImageLocality score of a sum for imageCount image uses: the sum
// clamped to [23 MiB, 1000 MiB × imageCount] and scaled to 0..100 (integer division). With
// tieBreak, a node holding something that the clamp rounds to 0 scores 1.
func Priority(sum int64, imageCount int, tieBreak bool) int64 {
	if imageCount <= 0 {
		return 0
	}
	maxThreshold := maxContainerThreshold * int64(imageCount)
	clamped := sum
	if clamped < minThreshold {
		clamped = minThreshold
	} else if clamped > maxThreshold {
		clamped = maxThreshold
	}
	score := 100 * (clamped - minThreshold) / (maxThreshold - minThreshold)
	if score == 0 && sum > 0 && tieBreak {
		score = 1
	}
	return score
}
