package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// KWOKNodeAnnotation marks nodes that KWOK simulates.
const KWOKNodeAnnotation = "kwok.x-k8s.io/node"

// SimulatedTaint is on every simulated node (KWOK's own convention): nothing runs there, so a
// pod that does not say it wants a simulated node (SimulatedToleration) must never land on
// one. Without it a chart component (berth-scheduler, the operator) could be placed on a KWOK
// node, show Running with nothing running, and leave the cluster without it.
var SimulatedTaint = corev1.Taint{Key: KWOKNodeAnnotation, Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// SimulatedToleration lets a pod meant for simulated nodes (demo scenarios, benchmarks,
// suites' workloads) land on them.
var SimulatedToleration = corev1.Toleration{Key: SimulatedTaint.Key, Operator: corev1.TolerationOpEqual,
	Value: SimulatedTaint.Value, Effect: SimulatedTaint.Effect}

// TolerateSimulated returns tols with SimulatedToleration added (once).
func TolerateSimulated(tols []corev1.Toleration) []corev1.Toleration {
	for _, t := range tols {
		if t.MatchToleration(&SimulatedToleration) || t.Operator == corev1.TolerationOpExists && t.Key == "" {
			return tols
		}
	}
	return append(append([]corev1.Toleration(nil), tols...), SimulatedToleration)
}

// NodeSpec describes a simulated node.
type NodeSpec struct {
	Name   string
	CPU    string // e.g. "8"
	Memory string // e.g. "32Gi"
	Pods   int    // pod capacity; default 110
	Labels map[string]string
	// Taints besides SimulatedTaint, which every simulated node carries.
	Taints []corev1.Taint
	// WithoutSimulatedTaint leaves SimulatedTaint off: only for a cluster of simulated nodes
	// alone (berth-local -simulated), where every workload is meant for them and nothing could
	// run anywhere else.
	WithoutSimulatedTaint bool
	// PodCIDR is the node's spec.podCIDR; empty: SimulatedPodCIDR, where KWOK gives its pods
	// addresses (none with Config.WithoutPodCIDRs). KWOK takes a node's pods' addresses from
	// its podCIDR, so another range gives them addresses there.
	PodCIDR string
}

// NodeObject renders spec as a Node that KWOK manages. Ready says whether to mark it Ready
// already (for clusters without KWOK, where nothing else would).
func NodeObject(spec NodeSpec, ready bool) *corev1.Node {
	if spec.CPU == "" {
		spec.CPU = "4"
	}
	if spec.Memory == "" {
		spec.Memory = "32Gi"
	}
	if spec.Pods == 0 {
		spec.Pods = 110
	}
	labels := map[string]string{
		"kubernetes.io/hostname": spec.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(spec.CPU),
		corev1.ResourceMemory: resource.MustParse(spec.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(spec.Pods), resource.DecimalSI),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{KWOKNodeAnnotation: "fake"},
		},
		Spec:   corev1.NodeSpec{Taints: append([]corev1.Taint(nil), spec.Taints...)},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res, Phase: corev1.NodeRunning},
	}
	if !spec.WithoutSimulatedTaint {
		n.Spec.Taints = append(n.Spec.Taints, SimulatedTaint)
	}
	if ready {
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "BerthSimulated",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
	}
	return n
}

// AddNodes creates simulated nodes and waits until they are Ready. Without KWOK the nodes are
// created Ready as bare API objects (what scheduler benchmarks need).
func (c *Cluster) AddNodes(ctx context.Context, specs ...NodeSpec) error {
	withKWOK := !c.cfg.WithoutKWOK
	for _, s := range specs {
		n := NodeObject(s, !withKWOK)
		if cidr := s.PodCIDR; !c.cfg.WithoutPodCIDRs {
			if cidr == "" {
				cidr = SimulatedPodCIDR
			}
			n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
		if !withKWOK {
			// why re-read on conflict: a controller-manager (when one runs) writes new nodes too
			// (its node lifecycle controller), and CI once lost this race.
			nodes := c.Client.CoreV1().Nodes()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := nodes.Get(ctx, s.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				// Status is a subresource: Create drops it.
				cur.Status = n.Status
				_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return fmt.Errorf("marking node %s ready: %w", s.Name, err)
			}
			// Admission taints new nodes not-ready; without a controller-manager nothing
			// would lift it once the node reports Ready.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := nodes.Get(ctx, s.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Spec.Taints = n.Spec.Taints
				_, err = nodes.Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return fmt.Errorf("untainting node %s: %w", s.Name, err)
			}
		}
	}
	for _, s := range specs {
		if err := c.WaitNodeReady(ctx, s.Name, c.cfg.ReadyTimeout); err != nil {
			return err
		}
	}
	return nil
}

// WaitNodeReady waits for the node's Ready condition.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not found"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = string(cond.Status) + " " + cond.Reason
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition"
		return false, nil
	})
	if err != nil {
		comp := KWOK
		if c.cfg.WithoutKWOK {
			comp = APIServer
		}
		return &ComponentError{Component: comp, Err: fmt.Errorf("node %s not Ready after %s (%s): %w", name, timeout, last, err),
			LogPath: c.logPath(comp), LogTail: tailFile(c.logPath(comp), 20)}
	}
	return nil
}

func (c *Cluster) logPath(component string) string { return c.logDir() + "/" + component + ".log" }
