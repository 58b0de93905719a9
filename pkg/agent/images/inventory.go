// Package images is the node agent's image part: it lists the node's images through the CRI v1
// ImageService, normalises their names with pkg/imageref and publishes them as the node's
// NodeImages object, which the NodeImageLocality scheduler plugin reads. See README.md.
package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"sort"
	"strings"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/imageref"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Inventory is one normalised listing of a node's images.
type Inventory struct {
	// Images sorted by ID, each ID once.
	Images []berthv1alpha1.NodeImage
	// TotalSizeBytes is the sum of SizeBytes.
	TotalSizeBytes int64
	// Dropped counts what normalisation left out (see BuildStats).
	Stats BuildStats
}

// BuildStats counts what normalisation could not keep, for logs and metrics.
type BuildStats struct {
	// InvalidRefs are tags or digests the reference grammar refuses (they can never match a
	// pod image, which the API server validates with the same grammar).
	InvalidRefs int
	// DuplicateRefs are names another image (lower ID) already holds.
	DuplicateRefs int
	// TruncatedRefs are names past NodeImagesMaxNames on one image.
	TruncatedRefs int
	// DuplicateIDs are repeated image IDs in the runtime's answer (merged).
	DuplicateIDs int
}

// Build normalises a runtime listing.
//
// Names: every repo tag and repo digest is normalised (docker.io/library/nginx:1.16,
// docker.io/library/nginx@sha256:…); placeholders ("<none>:<none>") and references the grammar
// refuses are dropped. A name belongs to one image only: when two images carry the same
// normalised name (two raw spellings of one tag, or a runtime mid-retag), the image with the
// lowest ID keeps it. The runtime gives no creation time to pick "the newest", and a stable
// rule keeps the published object from flapping between listings.
//
// Size: the runtime's size (compressed on containerd), 0 when it reports none.
func Build(raw []*runtimeapi.Image) Inventory {
	var inv Inventory
	byID := map[string]*berthv1alpha1.NodeImage{}
	var ids []string
	rawNames := map[string][2][]string{}
	for _, img := range raw {
		if img == nil || img.Id == "" {
			continue
		}
		ni, seen := byID[img.Id]
		if !seen {
			ni = &berthv1alpha1.NodeImage{ID: img.Id}
			byID[img.Id] = ni
			ids = append(ids, img.Id)
		} else {
			inv.Stats.DuplicateIDs++
		}
		size := int64(math.MaxInt64)
		if img.Size < math.MaxInt64 {
			size = int64(img.Size)
		}
		ni.SizeBytes = max(ni.SizeBytes, size)
		ni.Pinned = ni.Pinned || img.Pinned
		n := rawNames[img.Id]
		n[0] = append(n[0], img.RepoTags...)
		n[1] = append(n[1], img.RepoDigests...)
		rawNames[img.Id] = n
	}
	sort.Strings(ids)
	owner := map[string]string{}
	for _, id := range ids {
		ni := byID[id]
		n := rawNames[id]
		ni.Tags = inv.names(n[0], id, owner, imageref.Ref.Tagged)
		ni.Digests = inv.names(n[1], id, owner, imageref.Ref.Digested)
		inv.Images = append(inv.Images, *ni)
		if inv.TotalSizeBytes <= math.MaxInt64-ni.SizeBytes {
			inv.TotalSizeBytes += ni.SizeBytes
		} else {
			inv.TotalSizeBytes = math.MaxInt64
		}
	}
	return inv
}

// names normalises one image's tags (or digests), keeping those no lower ID already owns.
func (inv *Inventory) names(raw []string, id string, owner map[string]string, form func(imageref.Ref) string) []string {
	set := map[string]bool{}
	for _, s := range raw {
		if s == "" || strings.HasPrefix(s, "<none>") {
			continue
		}
		r, err := imageref.Normalize(s)
		if err != nil {
			inv.Stats.InvalidRefs++
			continue
		}
		k := form(r)
		if k == "" {
			// A repo tag that is really a digest reference (or the reverse): not this form.
			inv.Stats.InvalidRefs++
			continue
		}
		set[k] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		if o, taken := owner[k]; taken && o != id {
			inv.Stats.DuplicateRefs++
			continue
		}
		owner[k] = id
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > berthv1alpha1.NodeImagesMaxNames {
		inv.Stats.TruncatedRefs += len(out) - berthv1alpha1.NodeImagesMaxNames
		out = out[:berthv1alpha1.NodeImagesMaxNames]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Hash identifies the set of images and everything published about them (names, size,
// pinned): equal hashes mean the NodeImages spec need not be written.
func Hash(images []berthv1alpha1.NodeImage) string {
	// The images are sorted and their names sorted, so the encoding is canonical.
	b, _ := json.Marshal(images)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SpecBytes is the encoded size of a spec holding images.
func SpecBytes(node string, images []berthv1alpha1.NodeImage) int {
	b, _ := json.Marshal(berthv1alpha1.NodeImagesSpec{NodeName: node, Images: images})
	return len(b)
}

// managedFieldsPerImage is what the API server's managed fields add per image beyond its id:
// the list-map key and field names, measured at ~81 bytes (e2e/suites/imageinventory logs it).
const managedFieldsPerImage = 96

// StoredBytes estimates the stored object: the encoded spec plus the managed fields the API
// server keeps for every list entry (an entry key holding the id). The managed fields roughly
// double a list of short names, so the spec alone does not bound what etcd must accept.
func StoredBytes(node string, images []berthv1alpha1.NodeImage) int {
	n := SpecBytes(node, images)
	for _, i := range images {
		n += len(i.ID) + managedFieldsPerImage
	}
	return n
}
