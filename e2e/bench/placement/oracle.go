package placement

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// OracleScheduler is the schedulerName of the oracle run's pods: no scheduler serves it, the
// benchmark binds them itself.
const OracleScheduler = "placement-oracle"

// oracle places pods with what no scheduler can know: each pod's true mean CPU use (the
// scenario's UseMilliCPU, and with sigmas its BurstMilliCPU) before it runs. It binds every pod, where its requests fit, to the
// node whose true mean load (base + its pods' mean use + this pod's) would be lowest in percent
// of the node. It is a reference, not a bound: what a balanced placement with perfect knowledge
// of mean use leaves behind, so the table separates what placement could still win from what the
// scenario's bursts put on any node.
type oracle struct {
	// sigmas, when positive, also keeps that many true standard deviations of the node's
	// bursts free: the node chosen is the one whose mean + sigmas × σ would be lowest.
	sigmas float64
	mu     sync.Mutex
	nodes  []NodeSpec
	pods   map[string]*PodSpec
	// bound is the oracle's own ledger (pod → node), so pods of one wave see each other at
	// once, before the API server or the simulator do.
	bound map[string]string
}

func newOracle(sc *Scenario, sigmas float64) *oracle {
	o := &oracle{sigmas: sigmas, nodes: append([]NodeSpec(nil), sc.Nodes...), pods: map[string]*PodSpec{}, bound: map[string]string{}}
	sort.Slice(o.nodes, func(i, j int) bool { return o.nodes[i].Name < o.nodes[j].Name })
	for i := range sc.Pods {
		o.pods[sc.Pods[i].Name] = &sc.Pods[i]
	}
	return o
}

// choose picks pod's node and records it; "" when the pod is unknown or fits nowhere.
func (o *oracle) choose(pod string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps, ok := o.pods[pod]
	if !ok {
		return ""
	}
	if n, ok := o.bound[pod]; ok {
		return n
	}
	type sum struct {
		reqCPU, reqMem int64
		use, variance  float64
	}
	sums := map[string]*sum{}
	for _, n := range o.nodes {
		sums[n.Name] = &sum{}
	}
	for p, n := range o.bound {
		s, q := sums[n], o.pods[p]
		s.reqCPU += q.ReqMilliCPU
		s.reqMem += q.ReqMemMiB
		s.use += q.UseMilliCPU
		s.variance += q.BurstMilliCPU * q.BurstMilliCPU
	}
	best, bestLoad := "", 0.0
	for _, n := range o.nodes {
		s := sums[n.Name]
		if s.reqCPU+ps.ReqMilliCPU > n.MilliCPU || s.reqMem+ps.ReqMemMiB > n.MemoryMiB {
			continue
		}
		spread := o.sigmas * math.Sqrt(s.variance+ps.BurstMilliCPU*ps.BurstMilliCPU)
		load := n.BaseCPU + 100*(s.use+ps.UseMilliCPU+spread)/float64(n.MilliCPU)
		if best == "" || load < bestLoad {
			best, bestLoad = n.Name, load
		}
	}
	if best != "" {
		o.bound[pod] = best
	}
	return best
}

// forget drops a deleted pod from the ledger.
func (o *oracle) forget(pod string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.bound, pod)
}

// bind binds pod (created with OracleScheduler) through the API server, as a scheduler would.
func (o *oracle) bind(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	node := o.choose(pod.Name)
	if node == "" {
		return fmt.Errorf("oracle: no node fits %s", pod.Name)
	}
	err := c.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		o.forget(pod.Name)
	}
	return err
}
