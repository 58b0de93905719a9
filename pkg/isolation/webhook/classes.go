package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// NamespaceNameLabel is the label the API server puts on every namespace with its own name:
// the one namespace selector that names namespaces exactly.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// ClassGrants reads the administrator's InstanceClasses (README.md, "Classes belong to
// namespaces"). The operator's implementation reads its informer cache; tests use a map.
type ClassGrants interface {
	// Grant returns spec.namespaces of the InstanceClass named class; found is false when
	// there is none (the class then belongs to the namespace of each pod that carries it).
	Grant(class string) (namespaces []string, found bool, err error)
}

// StaticGrants is a fixed set of grants: class value → namespaces (tests, the chart tests'
// agreement check).
type StaticGrants map[string][]string

// Grant implements ClassGrants.
func (g StaticGrants) Grant(class string) ([]string, bool, error) {
	ns, ok := g[class]
	return ns, ok, nil
}

// CacheGrants reads InstanceClasses through a controller-runtime reader (the manager's
// cache: a Get there is a map lookup once its informer has synced).
type CacheGrants struct {
	Reader client.Reader
	// Timeout bounds one lookup (the first one waits for the informer to sync).
	Timeout time.Duration
}

// Grant implements ClassGrants. Any error but NotFound is returned: the webhook then refuses
// the pod (fail closed) rather than guess who owns the class.
func (g CacheGrants) Grant(class string) ([]string, bool, error) {
	t := g.Timeout
	if t <= 0 {
		t = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), t)
	defer cancel()
	var ic berthv1alpha1.InstanceClass
	if err := g.Reader.Get(ctx, client.ObjectKey{Name: class}, &ic); err != nil {
		// why: without the CRD no InstanceClass can exist, so every class is its pods'
		// namespace's; that is the answer, not a failure (the chart always installs it).
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading InstanceClass %s: %w", class, err)
	}
	return ic.Spec.Namespaces, true, nil
}

// owners is the namespaces sharing pod's class (key=class): the InstanceClass's list, or the
// pod's namespace alone. A pod of a namespace the InstanceClass does not list is refused,
// naming the field, the InstanceClass and the grant to ask for. shared says an InstanceClass
// shares the class (its list may still be the pod's namespace alone).
func (c *Config) owners(pod *corev1.Pod, key, class string) (owners []string, shared bool, err error) {
	if c.Classes == nil {
		return []string{pod.Namespace}, false, nil
	}
	ns, found, err := c.Classes.Grant(class)
	if err != nil {
		return nil, false, err
	}
	if !found {
		return []string{pod.Namespace}, false, nil
	}
	if !slices.Contains(ns, pod.Namespace) {
		return nil, false, &Refusal{GrantRefusal(key, class, pod.Namespace, ns)}
	}
	return ns, true, nil
}

// GrantRefusal is the refusal of class (label key) in namespace ns, which the InstanceClass
// named class does not list (granted lists the ones it does). The chart's class-grant policy
// words it the same.
func GrantRefusal(key, class, ns string, granted []string) string {
	return fmt.Sprintf("metadata.labels[%s]: instance class %s belongs to the namespaces InstanceClass %s grants it to (%s), not to %s; "+
		"ask a cluster administrator to add %s to spec.namespaces of InstanceClass %s (kubectl edit instanceclass %s), "+
		"or use a class value that no InstanceClass names, which belongs to namespace %s alone",
		key, class, class, strings.Join(granted, ", "), ns, ns, class, class, ns)
}

// OwnerTerm keeps pods of other namespaces carrying the same class value (under key) off the
// pod's node: the class is owned by owners (the pod's namespace, or an InstanceClass's list),
// and the same value elsewhere is another class. With ClassTerm (other values, anywhere) it
// matches every pod of another effective class.
func OwnerTerm(key, class string, owners []string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{class}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: append([]string(nil), owners...)},
		}},
		TopologyKey: corev1.LabelHostname,
	}
}
