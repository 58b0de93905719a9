package operator

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// AgentReadyOptions say which agents WaitAgentsReady waits for.
type AgentReadyOptions struct {
	Namespace, DaemonSet string
	// Port of the agents' /readyz (the chart's 9101).
	Port int
	// Interval between polls (default 2s).
	Interval time.Duration
	// HTTP asks an agent its /readyz (default: 2 s timeout).
	HTTP *http.Client
}

// WaitAgentsReady is the chart's post-install/post-upgrade hook for agents with a CRI socket:
// it returns once the agent DaemonSet is rolled out and every agent on a Ready node is Ready,
// and otherwise, when ctx ends, an error naming each agent that is not and why.
//
// Why a hook: Helm's --wait takes a DaemonSet as ready while no more than maxUnavailable (1)
// of its pods are unready, so on a one-node cluster, or with one node whose socket is wrong,
// `helm install --wait` reports success with the agent unready (issue 20). Agents on nodes
// that are not Ready are left out: they cannot become Ready until their node does, which is not
// the release's fault.
//
// Why is taken from the agent itself where its pod runs (GET /readyz: "images: SocketMissing:
// CRI socket ...: permission denied"), else from the pod (its container waiting, the last
// Warning event: "hostPath type check failed" for a directory that does not exist). It is
// logged whenever it changes, so the log Helm prints for a failed hook says why even when
// Helm's own timeout ends the wait first.
func WaitAgentsReady(ctx context.Context, c client.Client, o AgentReadyOptions) error {
	if o.Namespace == "" || o.DaemonSet == "" || o.Port <= 0 {
		return fmt.Errorf("waiting for agents needs the namespace, the DaemonSet and the port")
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 2 * time.Second}
	}
	logger := log.FromContext(ctx).WithValues("daemonSet", o.Namespace+"/"+o.DaemonSet)
	var last string
	for {
		waiting, err := unreadyAgents(ctx, c, o)
		if err != nil {
			if ctx.Err() != nil && last != "" {
				return notReady(o, last, ctx.Err())
			}
			return err
		}
		if len(waiting) == 0 {
			logger.Info("every agent on a Ready node is Ready")
			return nil
		}
		// A poll the deadline cut short ("not reachable ... deadline exceeded") says less than
		// the complete one before it: keep that one for the error.
		if now := strings.Join(waiting, "; "); now != last && (ctx.Err() == nil || last == "") {
			logger.Info("agents not Ready", "agents", now)
			last = now
		}
		select {
		case <-ctx.Done():
			return notReady(o, last, ctx.Err())
		case <-time.After(o.Interval):
		}
	}
}

func notReady(o AgentReadyOptions, last string, err error) error {
	return fmt.Errorf("agents of DaemonSet %s/%s not Ready: %s (see NOTES.txt: agent.criSocket must be the CRI socket's path on the nodes): %w",
		o.Namespace, o.DaemonSet, last, err)
}

// unreadyAgents lists, as "<pod> on <node>: <why>", what keeps the DaemonSet from being ready:
// the rollout itself, then each agent on a Ready node that is not Ready.
func unreadyAgents(ctx context.Context, c client.Client, o AgentReadyOptions) ([]string, error) {
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.DaemonSet}, ds); err != nil {
		return nil, fmt.Errorf("reading DaemonSet %s/%s: %w", o.Namespace, o.DaemonSet, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil, fmt.Errorf("DaemonSet %s/%s: unusable selector %v: %v", o.Namespace, o.DaemonSet, ds.Spec.Selector, err)
	}
	st := ds.Status
	if st.ObservedGeneration != ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled {
		return []string{fmt.Sprintf("rollout: %d of %d agents updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}, nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the agents of %s/%s: %w", o.Namespace, o.DaemonSet, err)
	}
	var out []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || podReady(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			node := &corev1.Node{}
			if err := c.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node); err == nil && !nodeReady(node) {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, why(ctx, c, o, p)))
	}
	sort.Strings(out)
	return out, nil
}

// why an agent pod is not Ready, in its own words where it can answer.
func why(ctx context.Context, c client.Client, o AgentReadyOptions, p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return strings.TrimSpace("waiting: "+w.Reason+" "+w.Message) + lastWarning(ctx, c, p)
		}
		if cs.State.Terminated != nil || cs.State.Running == nil {
			continue
		}
		if p.Status.PodIP == "" {
			break
		}
		rctx, cancel := context.WithTimeout(ctx, o.HTTP.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(o.Port))+"/readyz", nil)
		if err != nil {
			return err.Error()
		}
		resp, err := o.HTTP.Do(req)
		if err != nil {
			return "running, /readyz not reachable from here (" + err.Error() + ")" + lastWarning(ctx, c, p)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Sprintf("/readyz %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return "not running yet" + lastWarning(ctx, c, p)
}

// lastWarning is the pod's most recent Warning event, if any (mounts that fail, images that do
// not pull), as "; <reason>: <message>".
func lastWarning(ctx context.Context, c client.Client, p *corev1.Pod) string {
	var evs corev1.EventList
	err := c.List(ctx, &evs, client.InNamespace(p.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", p.Name)})
	if err != nil {
		return ""
	}
	var latest *corev1.Event
	for i := range evs.Items {
		e := &evs.Items[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.UID != p.UID {
			continue
		}
		if latest == nil || eventTime(e).After(eventTime(latest)) {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return "; " + latest.Reason + ": " + latest.Message
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
