package profiles

import "fmt"

// NodeStatus is what one SecurityProfileNodeStatus says: the state of one profile on one node.
type NodeStatus struct {
	// Name of the object.
	Name string
	// ProfileID is its label spo.x-k8s.io/profile-id (Profile.ID).
	ProfileID string
	// Kind is its label spo.x-k8s.io/profile-kind ("SeccompProfile", "SelinuxProfile", ...).
	Kind string
	Node string
	// State is Installed, Pending, InProgress, Error, Terminating, Partial or Disabled.
	State string
}

// StateInstalled is the only state in which a pod's container can start with the profile.
const StateInstalled = "Installed"

// ParseNodeStatus reads an unstructured SecurityProfileNodeStatus in either of SPO's shapes:
// top-level nodeName and status (<= v0.10), or spec.nodeName and status.status (v1).
func ParseNodeStatus(obj map[string]interface{}) (*NodeStatus, error) {
	meta, _ := obj["metadata"].(map[string]interface{})
	ns := &NodeStatus{}
	ns.Name, _ = meta["name"].(string)
	if ls, ok := meta["labels"].(map[string]interface{}); ok {
		ns.ProfileID, _ = ls[ProfileIDLabel].(string)
		ns.Kind, _ = ls["spo.x-k8s.io/profile-kind"].(string)
	}
	ns.Node, _ = obj["nodeName"].(string)
	if spec, ok := obj["spec"].(map[string]interface{}); ok && ns.Node == "" {
		ns.Node, _ = spec["nodeName"].(string)
	}
	switch st := obj["status"].(type) {
	case string:
		ns.State = st
	case map[string]interface{}:
		ns.State, _ = st["status"].(string)
	}
	if ns.Name == "" || ns.ProfileID == "" || ns.Node == "" {
		return nil, fmt.Errorf("SecurityProfileNodeStatus %q: the profile-id label and the node name are required", ns.Name)
	}
	return ns, nil
}
