package placement

import (
	"context"
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
// scenario's UseMilliCPU, and with sigmas its BurstMilliCPU) before it runs. Both of its modes
// are greedy references, not bounds: each pod is placed once, in arrival order, on the node best
// for that pod alone, never looking ahead and never moving a pod, so a placement that plans a
// whole wave or moves pods can do better.
//   - balancing (packTarget 0): every pod, where its requests fit, to the node whose true mean
//     load (base + its pods' mean use + this pod's) would be lowest in percent of the node;
//   - packing (packTarget > 0): to the fullest node whose true mean load with the pod stays at or
//     under packTarget — what TargetLoadPacking would do with perfect knowledge — and, when no
//     node stays under it, to the lowest as balancing would.
type oracle struct {
	// sigmas, when positive, also keeps that many true standard deviations of the node's
	// bursts free: the node chosen is the one whose mean + sigmas × σ would be lowest.
	sigmas     float64
	packTarget float64
	mu         sync.Mutex
	nodes      []NodeSpec
	pods       map[string]*PodSpec
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

// adopt makes a workload pod known with its true use.
func (o *oracle) adopt(pod string, spec *PodSpec) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.pods[pod]; !ok {
		o.pods[pod] = spec
	}
}

// choose picks pod's node and records it; "" when the pod is unknown or fits nowhere.
func (o *oracle) choose(pod string) string {
	n, _ := o.chooseLoad(pod)
	return n
}

type nodeSum struct {
	reqCPU, reqMem int64
	use, variance  float64
}

// chooseLoad is choose with the true mean load (percent) the chosen node has with the pod: the
// oracle's prediction, compared like the scheduler's with what the watcher measures later.
func (o *oracle) chooseLoad(pod string) (string, float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps, ok := o.pods[pod]
	if !ok {
		return "", 0
	}
	if n, ok := o.bound[pod]; ok {
		return n, 0
	}
	sums := map[string]*nodeSum{}
	for _, n := range o.nodes {
		sums[n.Name] = &nodeSum{}
	}
	for p, n := range o.bound {
		s, q := sums[n], o.pods[p]
		s.reqCPU += q.ReqMilliCPU
		s.reqMem += q.ReqMemMiB
		s.use += q.UseMilliCPU
		s.variance += q.BurstMilliCPU * q.BurstMilliCPU
	}
	low, lowLoad, lowMean := "", 0.0, 0.0
	full, fullLoad, fullMean := "", 0.0, 0.0
	for _, n := range o.nodes {
		s := sums[n.Name]
		if s.reqCPU+ps.ReqMilliCPU > n.MilliCPU || s.reqMem+ps.ReqMemMiB > n.MemoryMiB {
			continue
		}
		mean := n.BaseCPU + 100*(s.use+ps.UseMilliCPU)/float64(n.MilliCPU)
		load := mean + 100*o.sigmas*math.Sqrt(s.variance+ps.BurstMilliCPU*ps.BurstMilliCPU)/float64(n.MilliCPU)
		if low == "" || load < lowLoad {
			low, lowLoad, lowMean = n.Name, load, mean
		}
		if o.packTarget > 0 && load <= o.packTarget && (full == "" || load > fullLoad) {
			full, fullLoad, fullMean = n.Name, load, mean
		}
	}
	best, mean := low, lowMean
	if full != "" {
		best, mean = full, fullMean
	}
	if best != "" {
		o.bound[pod] = best
	}
	return best, mean
}

// forget drops a deleted pod from the ledger.
func (o *oracle) forget(pod string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.bound, pod)
}

// bindTo binds pod (created with OracleScheduler) to node, chosen by chooseLoad, through the API
// server, as a scheduler would; a failed binding is forgotten.
func (o *oracle) bindTo(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, node string) error {
	err := c.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		o.forget(pod.Name)
	}
	return err
}
