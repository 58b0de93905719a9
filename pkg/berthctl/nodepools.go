package berthctl

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// NodePoolResource is Karpenter's NodePool (karpenter.sh/v1), read unstructured: kubectl-berth
// links no Karpenter package.
var NodePoolResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// nodePoolCRD is the CRD whose presence says Karpenter is installed.
const nodePoolCRD = "nodepools.karpenter.sh"

// isolationPool is what the operator's --isolation-* arguments say about the class node pool:
// what Karpenter's nodes must carry to receive classed pods.
type isolationPool struct {
	labelKey, labelValue              string
	taintKey, taintValue, taintEffect string
	// marker: the webhook adds the autoscaler marker's terms (--isolation-autoscaler-marker),
	// so a NodePool must let NodeClaims carry classmarker.Key.
	marker bool
}

// isolationPoolFromArgs reads the pool from the operator container's command line as the chart
// writes it (templates/_isolation.tpl: --isolation-webhook, --isolation-pool-label=k=v,
// --isolation-pool-taint=k=v:Effect, --isolation-autoscaler-marker=bool). on is false when the
// webhook is off (no class pool to check). A flag the chart left out has the operator's default
// (pkg/isolation/webhook Defaults: ipp=true, ipp=true:NoSchedule, marker on).
func isolationPoolFromArgs(args []string) (p isolationPool, on bool, err error) {
	p = isolationPool{labelKey: "ipp", labelValue: "true", taintKey: "ipp", taintValue: "true", taintEffect: "NoSchedule", marker: true}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		next := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch name {
		case "isolation-webhook":
			on = !hasVal || val == "true"
		case "isolation-autoscaler-marker":
			if !hasVal {
				p.marker = true
				continue
			}
			if p.marker, err = strconv.ParseBool(val); err != nil {
				return p, on, fmt.Errorf("the operator's --isolation-autoscaler-marker=%q is not a boolean", val)
			}
		case "isolation-pool-label":
			v := next()
			k, lv, ok := strings.Cut(v, "=")
			if !ok || k == "" {
				return p, on, fmt.Errorf("the operator's --isolation-pool-label=%q: want key=value", v)
			}
			p.labelKey, p.labelValue = k, lv
		case "isolation-pool-taint":
			v := next()
			kv, eff, ok := strings.Cut(v, ":")
			k, tv, ok2 := strings.Cut(kv, "=")
			if !ok || !ok2 || k == "" || eff == "" {
				return p, on, fmt.Errorf("the operator's --isolation-pool-taint=%q: want key=value:Effect", v)
			}
			p.taintKey, p.taintValue, p.taintEffect = k, tv, eff
		}
	}
	return p, on, nil
}

func operatorArgs(d *appsv1.Deployment) []string {
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		args = append(append(args, c.Command...), c.Args...)
	}
	return args
}

// nodePoolChecks names, where Karpenter is installed and the operator serves the isolation
// webhook, each NodePool that cannot make nodes for classed pods: a node without the pool's
// label or taint never receives them (the webhook requires the label; the taint keeps other pods
// off), and without the marker requirement (classmarker.Key Exists) Karpenter cannot put a
// class's marker on its NodeClaim, so it relaxes to the unmarked term and may pack two classes
// onto one claim, whose second class InstanceIsolation then refuses. A NodePool with none of the
// three is another pool and only listed.
func nodePoolChecks(ctx context.Context, in StatusInput, operator *appsv1.Deployment) ([]Check, error) {
	if operator == nil {
		return nil, nil
	}
	pool, on, err := isolationPoolFromArgs(operatorArgs(operator))
	if err != nil {
		return []Check{{Area: "nodepool", Name: "-", State: Warn, Detail: err.Error(),
			Fix: "kubectl -n " + in.BerthNamespace + " get deployment " + operator.Name + " -o yaml (helm upgrade writes the chart's isolation.pool)"}}, nil
	}
	if !on {
		return nil, nil
	}
	// why list, not get: the chart's reader role grants list on CRDs (crdChecks), not get.
	crds, err := in.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nodePoolCRD})
	if err != nil {
		return nil, explainAPIError(err, "list customresourcedefinitions")
	}
	installed := false
	for _, c := range crds.Items {
		installed = installed || c.GetName() == nodePoolCRD
	}
	if !installed {
		return nil, nil // no Karpenter: nothing to check
	}
	l, err := in.Dynamic.Resource(NodePoolResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return []Check{{Area: "nodepool", Name: "-", State: Warn, Detail: "you may not list nodepools.karpenter.sh, so whether Karpenter can make nodes for the isolation pool is unknown",
			Fix: "kubectl create clusterrole nodepool-reader --verb=list --resource=nodepools.karpenter.sh and bind it to yourself"}}, nil
	}
	if err != nil {
		return nil, explainAPIError(err, "list nodepools.karpenter.sh")
	}
	items := l.Items
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	var out []Check
	serving := 0
	for _, np := range items {
		missing, has := pool.missingFrom(np)
		c := Check{Area: "nodepool", Name: np.GetName()}
		switch {
		case len(missing) == 0:
			serving++
			c.State, c.Detail = OK, "makes isolation pool nodes ("+pool.describe()+")"
		case has == 0:
			c.State, c.Detail = OK, "not for the isolation pool: lacks "+strings.Join(missing, ", ")
		default:
			c.State = Fail
			c.Detail = "Karpenter's nodes of this pool never receive classed pods: its template lacks " + strings.Join(missing, " and ")
			c.Fix = "kubectl edit nodepool " + np.GetName() + " (spec.template: metadata.labels, spec.taints, spec.requirements); the isolation pool is " + pool.describe()
		}
		out = append(out, c)
	}
	if serving == 0 {
		out = append(out, Check{Area: "nodepool", Name: "-", State: Warn,
			Detail: "no NodePool makes nodes for the isolation pool (" + pool.describe() + "): a waiting class gets no node from Karpenter",
			Fix:    "create a NodePool whose template carries the pool's label and taint" + map[bool]string{true: " and the requirement " + classmarker.Key + " Exists", false: ""}[pool.marker]})
	}
	return out, nil
}

func (p isolationPool) describe() string {
	s := fmt.Sprintf("label %s=%s, taint %s=%s:%s", p.labelKey, p.labelValue, p.taintKey, p.taintValue, p.taintEffect)
	if p.marker {
		s += ", requirement " + classmarker.Key + " Exists"
	}
	return s
}

// missingFrom lists what np's template lacks of the pool, and how many of the pool's parts it
// has. The label counts when set in template.metadata.labels or required In exactly that one
// value (Karpenter labels its nodes with single-valued In requirements).
func (p isolationPool) missingFrom(np unstructured.Unstructured) (missing []string, has int) {
	labels, _, _ := unstructured.NestedStringMap(np.Object, "spec", "template", "metadata", "labels")
	taints, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "taints")
	reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
	label := labels[p.labelKey] == p.labelValue
	marker := false
	for _, r := range reqs {
		m, _ := r.(map[string]any)
		key, _ := m["key"].(string)
		op, _ := m["operator"].(string)
		vals, _ := m["values"].([]any)
		if key == p.labelKey && op == "In" && len(vals) == 1 && vals[0] == p.labelValue {
			label = true
		}
		if key == classmarker.Key && op == "Exists" {
			marker = true
		}
	}
	taint := false
	for _, t := range taints {
		m, _ := t.(map[string]any)
		v, _ := m["value"].(string)
		if m["key"] == p.taintKey && v == p.taintValue && m["effect"] == p.taintEffect {
			taint = true
		}
	}
	add := func(ok bool, what string) {
		if ok {
			has++
		} else {
			missing = append(missing, what)
		}
	}
	add(label, fmt.Sprintf("the label %s=%s", p.labelKey, p.labelValue))
	add(taint, fmt.Sprintf("the taint %s=%s:%s", p.taintKey, p.taintValue, p.taintEffect))
	if p.marker {
		add(marker, "the requirement "+classmarker.Key+" Exists")
	}
	return missing, has
}
