package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeImageLocalityArgs are NodeImageLocality's arguments. The score weight lives in the
// profile, not here.
// +berth:plugin:name=NodeImageLocality,order=50,argsOptional,package=pkg/scheduler/plugins/imagelocality
// +berth:plugin:doc=NodeImageLocality scores nodes by the images they already hold (NodeImages from the
// +berth:plugin:doc=agents, else node.status.images). Enabling it disables the in-tree ImageLocality in the
// +berth:plugin:doc=profile, so images are not counted twice.
// +kubebuilder:object:root=true
type NodeImageLocalityArgs struct {
	metav1.TypeMeta `json:",inline"`

	// AssumePulledFor is how long the images of a pod just placed on a node count as present
	// there (the pull is under way); "0s" turns it off. Default 5m, at most 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	AssumePulledFor *metav1.Duration `json:"assumePulledFor,omitempty"`
	// UseNodeStatus reads node.status.images for nodes without a NodeImages object (default true).
	// +optional
	UseNodeStatus *bool `json:"useNodeStatus,omitempty"`
	// TieBreakSmallImages scores 1 instead of 0 on nodes holding images too small for the
	// in-tree 23 MiB floor (default true); false gives the in-tree formula exactly.
	// +optional
	TieBreakSmallImages *bool `json:"tieBreakSmallImages,omitempty"`
}

// DefaultAssumePulledFor is long enough for a large pull to finish and the agent's next
// inventory (every 30s by default) to report it, short enough that a failed pull stops
// attracting pods soon.
const DefaultAssumePulledFor = 5 * time.Minute

// SetDefaults_NodeImageLocalityArgs fills unset fields.
func SetDefaults_NodeImageLocalityArgs(obj *NodeImageLocalityArgs) {
	setDefault(&obj.AssumePulledFor, metav1.Duration{Duration: DefaultAssumePulledFor})
	setDefault(&obj.UseNodeStatus, true)
	setDefault(&obj.TieBreakSmallImages, true)
}
