package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The NodeImages contract shared by the node agent (writer, pkg/agent/images) and the
// NodeImageLocality scheduler plugin (reader). See pkg/agent/images/README.md.
const (
	// NodeImagesMaxImages is the most images one NodeImages object may list (the CRD's maxItems
	// and the agent's default --max-images). Past it the agent refuses to write and keeps the
	// previous inventory, with Ready=False reason TooManyImages.
	NodeImagesMaxImages = 5000
	// NodeImagesMaxNames is the most tags, and separately the most digests, one image may list.
	NodeImagesMaxNames = 32

	// NodeImagesConditionReady is True when the agent's last list through the CRI succeeded and
	// was published.
	NodeImagesConditionReady = "Ready"
	// NodeImagesConditionStale is True when the runtime could not be listed: spec.images is the
	// inventory observed at status.observedTime, kept rather than emptied.
	NodeImagesConditionStale = "Stale"

	// NodeImagesFieldManager is the agent's field manager.
	NodeImagesFieldManager = "berth-agent"
)

// NodeImages lists the images present on one node, as its Berth agent read them through the CRI.
// Cluster-scoped; name = node name; owner reference to the Node.
//
// Only the agent running on that node may write it (a ValidatingAdmissionPolicy in the chart
// compares the name with the node-name extra of the agent's pod-bound ServiceAccount token).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nimg,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Images",type=integer,JSONPath=`.status.imageCount`
// +kubebuilder:printcolumn:name="Total size",type=string,JSONPath=`.status.totalSize`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.spec.nodeName == self.metadata.name",message="spec.nodeName must equal metadata.name"
type NodeImages struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeImagesSpec `json:"spec"`
	// +optional
	Status NodeImagesStatus `json:"status,omitempty"`
}

// NodeImagesSpec is the node's image inventory.
type NodeImagesSpec struct {
	// NodeName is the node whose images are listed; it equals metadata.name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// Images present on the node, sorted by id.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=5000
	// +optional
	Images []NodeImage `json:"images,omitempty"`
}

// NodeImage is one image as the container runtime reports it.
type NodeImage struct {
	// ID is the CRI image id (sha256:...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ID string `json:"id"`
	// Tags, normalised (docker.io/library/nginx:1.16), sorted, deduplicated.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Tags []string `json:"tags,omitempty"`
	// Digests, normalised (docker.io/library/nginx@sha256:...), sorted, deduplicated.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Digests []string `json:"digests,omitempty"`
	// SizeBytes as the runtime reports it (compressed on containerd); 0 = unknown.
	// +kubebuilder:validation:Minimum=0
	SizeBytes int64 `json:"sizeBytes"`
	// Pinned images are exempt from the kubelet's image garbage collection.
	// +optional
	Pinned bool `json:"pinned,omitempty"`
}

// NodeImagesStatus is the state of the agent's listing.
type NodeImagesStatus struct {
	// ObservedTime is when the agent last listed the runtime successfully.
	// +optional
	ObservedTime metav1.Time `json:"observedTime,omitempty"`
	// ImageCount is len(spec.images).
	// +optional
	ImageCount int32 `json:"imageCount,omitempty"`
	// TotalSize is the sum of sizeBytes, human-readable (a resource.Quantity string).
	// +optional
	TotalSize string `json:"totalSize,omitempty"`
	// TotalSizeBytes is the sum of sizeBytes.
	// +optional
	TotalSizeBytes int64 `json:"totalSizeBytes,omitempty"`
	// Conditions: Ready (True: the last list succeeded and is published), Stale (True: the
	// runtime is unreachable; the inventory is the one observed at observedTime).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// NodeImagesList is a list of NodeImages.
type NodeImagesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeImages `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &NodeImages{}, &NodeImagesList{})
		return nil
	})
}
