package berthctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/pkg/berthctl/reach"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// States of a status check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
)

// Check is one line of `kubectl berth status`: what was looked at, how it is, and what to do
// when it is not ok.
type Check struct {
	Area    string `json:"area"`
	Name    string `json:"name"`
	State   string `json:"state"`
	Version string `json:"version,omitempty"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
}

// StatusView is `kubectl berth status`' answer.
type StatusView struct {
	Checks []Check `json:"checks"`
}

// Failed reports whether any check failed.
func (s *StatusView) Failed() bool {
	for _, c := range s.Checks {
		if c.State == Fail {
			return true
		}
	}
	return false
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// StatusInput is what CollectStatus reads: the API, the Lease (from reach.FindLease, or its
// error), and the watcher's document (or why it could not be read).
type StatusInput struct {
	Client         kubernetes.Interface
	Dynamic        dynamic.Interface
	BerthNamespace string
	Lease          *coordinationv1.Lease
	LeaseErr       error
	Watcher        *loadapi.Response
	WatcherFrom    string
	WatcherErr     error
	Now            time.Time
}

// CollectStatus checks components, the leader, the watcher's freshness, webhooks and CRDs.
// An error is returned only when the caller may not read what status needs at all (RBAC).
func CollectStatus(ctx context.Context, in StatusInput) (*StatusView, error) {
	comps, operatorDep, err := componentChecks(ctx, in)
	if err != nil {
		return nil, err
	}
	operator := ""
	if operatorDep != nil {
		operator = operatorDep.Name
	}
	v := &StatusView{Checks: comps}
	// In the order they are printed; the first that may not be read ends the command.
	for _, checks := range []func() ([]Check, error){
		func() ([]Check, error) { return secondarySchedulerChecks(ctx, in) },
		func() ([]Check, error) { return []Check{leaderCheck(in)}, nil },
		func() ([]Check, error) { return watcherChecks(ctx, in) },
		func() ([]Check, error) { return webhookChecks(ctx, in, operator) },
		func() ([]Check, error) { return crdChecks(ctx, in) },
		func() ([]Check, error) { return nodePoolChecks(ctx, in, operatorDep) },
	} {
		cs, err := checks()
		if err != nil {
			return nil, err
		}
		v.Checks = append(v.Checks, cs...)
	}
	return v, nil
}

// componentChecks reads the chart's Deployments and DaemonSets. It also returns the operator
// Deployment, from whose name the webhook check derives the release prefix and from whose
// arguments the NodePool check reads the isolation pool.
func componentChecks(ctx context.Context, in StatusInput) ([]Check, *appsv1.Deployment, error) {
	ns := in.BerthNamespace
	deps, err := in.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, explainAPIError(err, "list deployments in "+ns)
	}
	dss, err := in.Client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, explainAPIError(err, "list daemonsets in "+ns)
	}
	var comps []Check
	var operator *appsv1.Deployment
	for i := range deps.Items {
		d := &deps.Items[i]
		if !isBerth(d.Labels) {
			continue
		}
		if d.Labels["app.kubernetes.io/name"] == "berth-operator" {
			operator = d
		}
		comps = append(comps, deploymentCheck(ns, d))
	}
	for i := range dss.Items {
		d := &dss.Items[i]
		if isBerth(d.Labels) {
			comps = append(comps, daemonSetCheck(ns, d))
		}
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i].Name < comps[j].Name })
	if len(comps) == 0 {
		return []Check{{Area: "component", Name: "berth", State: Fail, Detail: "no Berth Deployment or DaemonSet in namespace " + ns,
			Fix: "install the chart there (helm install berth charts/berth -n " + ns + " --create-namespace) or pass --berth-namespace"}}, operator, nil
	}
	return comps, operator, nil
}

func deploymentCheck(ns string, d *appsv1.Deployment) Check {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	c := Check{Area: "component", Name: "deployment/" + d.Name, Version: version(d.Labels, d.Spec.Template.Spec.Containers),
		Detail: fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, want), State: OK}
	if d.Status.ReadyReplicas < want {
		c.State = Fail
		if d.Status.ReadyReplicas > 0 {
			c.State = Warn
		}
		c.Fix = fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", ns, d.Name, ns, d.Name)
	}
	return c
}

func daemonSetCheck(ns string, d *appsv1.DaemonSet) Check {
	c := Check{Area: "component", Name: "daemonset/" + d.Name, Version: version(d.Labels, d.Spec.Template.Spec.Containers),
		Detail: fmt.Sprintf("%d/%d ready", d.Status.NumberReady, d.Status.DesiredNumberScheduled), State: OK}
	if d.Status.NumberReady < d.Status.DesiredNumberScheduled {
		c.State = Warn
		c.Fix = fmt.Sprintf("kubectl -n %s get pods -l %s -o wide (the nodes without a ready agent are scored neutral)", ns, selectorOf(d))
	}
	return c
}

// secondarySchedulerChecks reads the SecondarySchedulers the operator runs: its own verdict
// (Available, Degraded with the field or image at fault) is the best account of the scheduler
// Deployment.
func secondarySchedulerChecks(ctx context.Context, in StatusInput) ([]Check, error) {
	ns := in.BerthNamespace
	sss, err := in.Dynamic.Resource(SecondarySchedulerResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case isNoMatch(err):
		// why: without the CRD there is nothing to read; the CRD check says so.
		return nil, nil
	case err != nil:
		return nil, explainAPIError(err, "list secondaryschedulers in "+ns)
	}
	var out []Check
	for _, u := range sss.Items {
		out = append(out, secondarySchedulerCheck(ns, u))
	}
	return out, nil
}

// leaderCheck reports who holds the scheduler's Lease.
func leaderCheck(in StatusInput) Check {
	leader := Check{Area: "leader", Name: "lease"}
	if in.LeaseErr != nil {
		leader.State, leader.Detail = Fail, in.LeaseErr.Error()
		leader.Fix = "is berth-scheduler running? kubectl -n " + in.BerthNamespace + " get secondaryschedulers,deployments; --scheduler-namespace and --lease name the Lease"
		return leader
	}
	l := in.Lease
	leader.Name = "lease/" + l.Namespace + "/" + l.Name
	holder, err := reach.Holder(l, in.Now)
	if err != nil {
		leader.State, leader.Detail = Fail, err.Error()
		leader.Fix = "no scheduler holds the Lease: pods for berth-scheduler stay Pending; kubectl -n " + l.Namespace + " get pods and the scheduler's logs (it needs get/update on its Lease)"
		return leader
	}
	leader.State = OK
	leader.Detail = "held by " + holder
	if l.Spec.RenewTime != nil {
		leader.Detail += fmt.Sprintf(", renewed %s ago", Age(ptr(int64(in.Now.Sub(l.Spec.RenewTime.Time).Seconds()))))
	}
	return leader
}

// watcherChecks summarises the watcher's freshness over the cluster's nodes (one check).
func watcherChecks(ctx context.Context, in StatusInput) ([]Check, error) {
	ns := in.BerthNamespace
	w := Check{Area: "watcher", Name: "load"}
	if in.WatcherErr != nil {
		w.State, w.Detail = Fail, in.WatcherErr.Error()
		w.Fix = "kubectl -n " + ns + " get pods -l " + WatcherLabel + "; while the scheduler cannot read it, load-aware plugins score every node neutral"
		return []Check{w}, nil
	}
	nodes, err := in.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explainAPIError(err, "list nodes")
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	fresh, stale, missing := watcherFreshness(in.Watcher, names)
	w.Name = in.WatcherFrom
	w.Detail = fmt.Sprintf("%d fresh, %d stale, %d missing of %d nodes (source %s)", len(fresh), len(stale), len(missing), len(names), in.Watcher.Source)
	w.State = OK
	if len(stale)+len(missing) > 0 {
		w.State = Warn
		w.Detail += ": " + listSome(append(stale, missing...), 5)
		w.Fix = "kubectl berth nodes --sort-by load; on those nodes the berth-agent pod (kubectl -n " + ns + " get pods -o wide -l app.kubernetes.io/name=berth-agent) and its logs"
	}
	if len(names) > 0 && len(fresh) == 0 {
		w.State = Fail
	}
	return []Check{w}, nil
}

// watcherFreshness sorts nodes by their loadState.
func watcherFreshness(doc *loadapi.Response, nodes []string) (fresh, stale, missing []string) {
	for _, name := range nodes {
		switch loadState(doc, name) {
		case Fresh:
			fresh = append(fresh, name)
		case Stale:
			stale = append(stale, name)
		default:
			missing = append(missing, name)
		}
	}
	return fresh, stale, missing
}

// webhookChecks reads the isolation webhook the chart installs, named after the release prefix
// (that of the operator's Deployment, <prefix>-operator), by name: the chart grants get on that
// one name only, never list on webhook configurations.
func webhookChecks(ctx context.Context, in StatusInput, operator string) ([]Check, error) {
	ns := in.BerthNamespace
	if operator == "" {
		return []Check{{Area: "webhook", Name: "-", State: Warn, Detail: "no berth-operator Deployment in " + ns + ", so the isolation webhook's name is unknown",
			Fix: "the operator serves the webhook: kubectl -n " + ns + " get deployments -l app.kubernetes.io/name=berth-operator"}}, nil
	}
	name := strings.TrimSuffix(operator, "-operator") + "-instance-isolation"
	m, err := in.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return []Check{{Area: "webhook", Name: name, State: OK, Detail: "not installed (isolation.webhook is off)"}}, nil
	case err != nil:
		return nil, explainAPIError(err, "get mutatingwebhookconfiguration "+name)
	}
	var out []Check
	for _, wh := range m.Webhooks {
		out = append(out, webhookCheck(ctx, in.Client, ns, m.Name, wh))
	}
	return out, nil
}

// crdChecks reports whether each CRD of berth.dev is established.
func crdChecks(ctx context.Context, in StatusInput) ([]Check, error) {
	crds, err := in.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explainAPIError(err, "list customresourcedefinitions")
	}
	var out []Check
	for _, u := range crds.Items {
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		if group != "berth.dev" {
			continue
		}
		c := Check{Area: "crd", Name: u.GetName(), State: OK, Detail: "established"}
		if !crdEstablished(u) {
			c.State, c.Detail = Fail, "not established"
			c.Fix = "kubectl get crd " + u.GetName() + " -o yaml (status.conditions says why); helm upgrade reinstalls charts/berth/crds"
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		out = append(out, Check{Area: "crd", Name: "berth.dev", State: Fail, Detail: "no CustomResourceDefinition of group berth.dev",
			Fix: "install the chart (its crds/ directory), or kubectl apply -f charts/berth/crds"})
	}
	return out, nil
}

// SecondarySchedulerResource is the operator's API.
var SecondarySchedulerResource = schema.GroupVersionResource{Group: "berth.dev", Version: "v1alpha1", Resource: "secondaryschedulers"}

func secondarySchedulerCheck(ns string, u unstructured.Unstructured) Check {
	c := Check{Area: "component", Name: "secondaryscheduler/" + u.GetName()}
	cond := func(t string) (status, reason, msg string) {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, x := range conds {
			if m, ok := x.(map[string]any); ok && m["type"] == t {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				msg, _ = m["message"].(string)
			}
		}
		return status, reason, msg
	}
	avail, reason, msg := cond("Available")
	degraded, dReason, dMsg := cond("Degraded")
	fix := "kubectl -n " + ns + " describe secondaryscheduler " + u.GetName() + " (the operator's conditions name the field or image at fault)"
	switch {
	case avail == "True" && degraded == "True":
		c.State, c.Detail, c.Fix = Warn, "Available, but Degraded ("+dReason+"): "+dMsg, fix
	case avail == "True":
		c.State, c.Detail = OK, "Available"
	case avail == "":
		c.State, c.Detail, c.Fix = Warn, "no Available condition yet: is the operator running?", "kubectl -n "+ns+" get deployments -l app.kubernetes.io/name=berth-operator"
	default:
		c.State, c.Detail, c.Fix = Fail, "not Available ("+reason+"): "+msg, fix
	}
	return c
}

func webhookCheck(ctx context.Context, client kubernetes.Interface, ns, config string, wh admissionregistrationv1.MutatingWebhook) Check {
	c := Check{Area: "webhook", Name: config + "/" + wh.Name, State: OK}
	policy := "Fail"
	if wh.FailurePolicy != nil {
		policy = string(*wh.FailurePolicy)
	}
	c.Detail = "failurePolicy " + policy
	switch {
	case len(wh.ClientConfig.CABundle) == 0:
		c.State, c.Detail = Fail, c.Detail+", no caBundle injected: the API server cannot trust it"
		c.Fix = "the operator (or cert-manager) injects it: kubectl -n " + ns + " logs deployment/" + strings.TrimSuffix(config, "-instance-isolation") + "-operator"
	case wh.ClientConfig.Service != nil:
		s := wh.ClientConfig.Service
		ready, err := readyEndpoints(ctx, client, s.Namespace, s.Name)
		switch {
		case err != nil:
			c.State, c.Detail = Warn, c.Detail+", endpoints of service "+s.Namespace+"/"+s.Name+" unreadable: "+err.Error()
		case ready == 0:
			c.State = Fail
			c.Detail += ", no ready endpoint behind service " + s.Namespace + "/" + s.Name
			if policy == "Fail" {
				c.Detail += ": matching pods are refused"
			}
			c.Fix = "kubectl -n " + s.Namespace + " get pods,endpointslices -l kubernetes.io/service-name=" + s.Name + " (the operator serves the webhook)"
		default:
			c.Detail += fmt.Sprintf(", %d ready endpoint(s)", ready)
		}
	}
	return c
}

func isBerth(l map[string]string) bool {
	return l["app.kubernetes.io/part-of"] == "berth" || l["app.kubernetes.io/managed-by"] == "berth-operator"
}

// version prefers the chart's version label, else the first container's image tag.
func version(labels map[string]string, cs []corev1.Container) string {
	if v := labels["app.kubernetes.io/version"]; v != "" {
		return v
	}
	if len(cs) > 0 {
		img := cs[0].Image
		if i := strings.LastIndex(img, "@"); i >= 0 {
			return img[i+1:]
		}
		if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
			return img[i+1:]
		}
	}
	return ""
}

func selectorOf(d *appsv1.DaemonSet) string {
	if d.Spec.Selector == nil {
		return ""
	}
	var parts []string
	for k, v := range d.Spec.Selector.MatchLabels {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func readyEndpoints(ctx context.Context, client kubernetes.Interface, ns, svc string) (int, error) {
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n, nil
}

func crdEstablished(u unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func listSome(names []string, n int) string {
	sort.Strings(names)
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

func ptr[T any](v T) *T { return &v }

// WriteStatus prints view as a table, json or yaml.
func WriteStatus(w io.Writer, view *StatusView, output string) error {
	if done, err := writeStructured(w, view, output, "table, json or yaml"); done {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AREA\tNAME\tSTATE\tVERSION\tDETAIL")
	for _, c := range view.Checks {
		ver := c.Version
		if ver == "" {
			ver = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Area, c.Name, strings.ToUpper(c.State), ver, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, c := range view.Checks {
		if c.Fix == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nwhat to do:")
			first = false
		}
		fmt.Fprintf(w, "  %s %s: %s\n", c.Area, c.Name, c.Fix)
	}
	return nil
}

// explainAPIError turns the API's refusals into one sentence naming the grant.
func explainAPIError(err error, what string) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not %s: bind the chart's <release>-berthctl-reader ClusterRole to yourself (kubectl create clusterrolebinding <you>-berthctl --clusterrole=<release>-berthctl-reader --user=<you>)", what)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server does not accept your credentials (to %s): log in again or check --kubeconfig/--context", what)
	}
	return fmt.Errorf("cannot %s: %v", what, err)
}
