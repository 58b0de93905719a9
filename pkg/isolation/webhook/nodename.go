package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Issue 35 item 2, "no nodeName door": a pod that names its node in spec.nodeName is never
// scheduled, and a Binding created by hand places a pod without any scheduler. Either way no
// Filter, no anti-affinity term and no pool taint of effect NoSchedule is evaluated (the kubelet
// enforces only NoExecute taints and node affinity), so a tenant who knows a pool node's name
// could run beside a class there. Outside the exempt namespaces both are refused on pool nodes.

// NodeLookup reads Nodes from a cache. Node returns (nil, nil) when there is no such node.
type NodeLookup interface {
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// nodeLookupTimeout bounds one cache read: the chart's webhook timeout is 5 s, and a cache that
// has not synced by then would only make the API server apply failurePolicy anyway.
const nodeLookupTimeout = 3 * time.Second

// CachedNodes is a NodeLookup over a controller-runtime cache (the operator's manager cache).
type CachedNodes struct{ Reader client.Reader }

// Node implements NodeLookup.
func (c CachedNodes) Node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &n, nil
}

// StaticNodes is a NodeLookup over a fixed set of nodes (tests).
type StaticNodes map[string]*corev1.Node

// Node implements NodeLookup.
func (s StaticNodes) Node(_ context.Context, name string) (*corev1.Node, error) {
	return s[name], nil
}

// poolMembership says why node belongs to the isolation pool ("" when it does not): the pool
// label (what the classes' node affinity requires), else a taint with the pool's key (any
// value or effect: a node an administrator tainted for the pool is the pool's, even if its
// label is still missing or mistyped).
func (c *Config) poolMembership(node *corev1.Node) string {
	if v, ok := node.Labels[c.PoolLabel]; ok && v == c.PoolValue {
		return fmt.Sprintf("label %s=%s", c.PoolLabel, c.PoolValue)
	}
	for _, t := range node.Spec.Taints {
		if t.Key == c.TaintKey {
			return fmt.Sprintf("taint %s", t.ToString())
		}
	}
	return ""
}

// lookupPoolNode returns why the named node is a pool node ("" when it is not), or a refusal
// when the webhook cannot tell. A node the cache does not hold is refused: a pod naming it
// would run there as soon as a node of that name joins, pool or not, and the cache cannot say
// which it will be.
func (c *Config) lookupPoolNode(what, name string) (string, error) {
	if c.Nodes == nil {
		return "", &Refusal{fmt.Sprintf("%s %q: this webhook has no view of the nodes, so it cannot tell whether it is an isolation pool node", what, name)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeLookupTimeout)
	defer cancel()
	node, err := c.Nodes.Node(ctx, name)
	switch {
	case err != nil:
		return "", &Refusal{fmt.Sprintf("%s %q: cannot tell whether it is an isolation pool node: %v", what, name, err)}
	case node == nil:
		return "", &Refusal{fmt.Sprintf("%s %q: no such node; a pod may name only an existing node that is not an isolation pool node "+
			"(one that joined later could be one), or be placed by its scheduler", what, name)}
	}
	return c.poolMembership(node), nil
}

// nodeNameRefusal refuses an unclassed pod that names a pool node in spec.nodeName (a classed
// pod naming any node is refused before this, in Mutate). The words are the policy's
// (<release>-instance-isolation-node-name), which sees the pool's nodes by their label.
func (c *Config) nodeNameRefusal(pod *corev1.Pod) error {
	if pod.Spec.NodeName == "" {
		return nil
	}
	why, err := c.lookupPoolNode("spec.nodeName", pod.Spec.NodeName)
	if err != nil {
		return err
	}
	if why == "" {
		return nil
	}
	return &Refusal{fmt.Sprintf("spec.nodeName: names node %s, an isolation pool node (%s); pool nodes belong to instance classes and are reached only "+
		"through the scheduler of the pod's class, never by naming the node; only pods in an exempt namespace (%s) may name a pool node",
		pod.Spec.NodeName, why, c.exemptList())}
}

// BindingRequest is a Binding (pods/binding, or the legacy bindings resource) to judge.
type BindingRequest struct {
	// Namespace and Pod name the pod being bound; Node is the binding's target.
	Namespace, Pod, Node string
	// User is the requester's username (request.userInfo.username).
	User string
}

// AdmitBinding refuses a binding that places a pod on a pool node outside the exempt
// namespaces unless the requester is one of PoolBinders (the schedulers of the classes). It
// reads no pod: who may place pods on the pool does not depend on which pod (a pod no class's
// scheduler would place there has no business there either).
func (c *Config) AdmitBinding(b BindingRequest) error {
	if slices.Contains(c.ExemptNamespaces, b.Namespace) || slices.Contains(c.PoolBinders, b.User) {
		return nil
	}
	if b.Node == "" {
		return errors.New("binding without a target node")
	}
	why, err := c.lookupPoolNode("target.name", b.Node)
	if err != nil {
		return err
	}
	if why == "" {
		return nil
	}
	return &Refusal{c.bindingRefusal(b, why)}
}

func (c *Config) bindingRefusal(b BindingRequest, why string) string {
	return fmt.Sprintf("target.name: binding pod %s/%s to node %s, an isolation pool node (%s); pool nodes are reached only through the scheduler "+
		"of the pod's class (%s), not %s; only pods in an exempt namespace (%s) may be bound there by anyone else",
		b.Namespace, b.Pod, b.Node, why, c.poolBinderList(), b.User, c.exemptList())
}

func (c *Config) poolBinderList() string {
	if len(c.PoolBinders) == 0 {
		return "none configured"
	}
	return strings.Join(c.PoolBinders, ", ")
}

func (c *Config) validatePoolBinders() field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("poolBinders")
	seen := map[string]bool{}
	for i, u := range c.PoolBinders {
		switch {
		case strings.TrimSpace(u) != u || u == "":
			errs = append(errs, field.Invalid(p.Index(i), u, "must be a username (e.g. system:serviceaccount:<namespace>:<name>), without spaces around it"))
		case seen[u]:
			errs = append(errs, field.Duplicate(p.Index(i), u))
		}
		seen[u] = true
	}
	return errs
}

// setupNodes gives the webhook the manager's Node cache and makes the operator ready only once
// it has synced: before that every pod naming a node and every binding by someone other than
// the schedulers would be refused for want of a view (fail closed), which a Service must not
// route to.
func setupNodes(mgr manager.Manager, c *Config) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return fmt.Errorf("the Node informer (RBAC: get, list, watch nodes): %w", err)
	}
	c.Nodes = CachedNodes{Reader: mgr.GetCache()}
	return mgr.AddReadyzCheck("isolation-webhook-nodes", func(*http.Request) error {
		if !inf.HasSynced() {
			return errors.New("the Node cache has not synced")
		}
		return nil
	})
}

// PoolNode says why node belongs to the isolation pool ("" when it does not): the pool label,
// else a taint with the pool's key (the marker writer's test, the same as for spec.nodeName).
func (c *Config) PoolNode(node *corev1.Node) string { return c.poolMembership(node) }
