package sysched

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Pods waiting for a profile to be installed. A pod the Filter refused everywhere because a
// profile it needs is not installed waits in the scheduler's unschedulable queue. SPO says it
// finished installing in a SecurityProfileNodeStatus, an object only SySched's own informer
// sees: no event of the scheduler's would retry the pod, which would wait for the queue's
// periodic flush (five minutes by default). So SySched remembers each refused pod by the
// profiles it waits for and hands it back to the queue (Handle.Activate) the moment a node
// reports one of them Installed or SPO stops reporting it at all (then nothing is filtered).

// waiting is one profile's set of pods refused for a profile not installed, by profile ID.
type waiting struct {
	mu   sync.Mutex
	byID map[string]map[types.UID]*v1.Pod
	ids  map[types.UID][]string
	// n is how many pods are noted; the pod informer's handlers read only this while none is.
	n atomic.Int64
	// gen moves with every change that can let a waiting pod fit. A cycle that notes its pod
	// after such a change (which then found nothing to release) retries the pod itself.
	gen atomic.Uint64
}

func newWaiting() *waiting {
	return &waiting{byID: map[string]map[types.UID]*v1.Pod{}, ids: map[types.UID][]string{}}
}

// note records pod as waiting for the profiles ids, in place of what it waited for before.
func (w *waiting) note(pod *v1.Pod, ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(pod.UID)
	for _, id := range ids {
		if w.byID[id] == nil {
			w.byID[id] = map[types.UID]*v1.Pod{}
		}
		w.byID[id][pod.UID] = pod
	}
	w.ids[pod.UID] = ids
	w.n.Store(int64(len(w.ids)))
}

// forget drops a pod that was bound, finished or deleted.
func (w *waiting) forget(uid types.UID) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(uid)
	w.n.Store(int64(len(w.ids)))
}

func (w *waiting) forgetLocked(uid types.UID) {
	for _, id := range w.ids[uid] {
		if m := w.byID[id]; m != nil {
			delete(m, uid)
			if len(m) == 0 {
				delete(w.byID, id)
			}
		}
	}
	delete(w.ids, uid)
}

// release marks a change that may let pods waiting for ids fit, and takes those pods out,
// keyed like the framework's PodsToActivate. A pod refused again is noted again.
func (w *waiting) release(ids []string) map[string]*v1.Pod {
	// why first: a cycle that notes its pod after this sees the new gen and retries itself.
	w.gen.Add(1)
	if w.n.Load() == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[string]*v1.Pod
	for _, id := range ids {
		for uid, p := range w.byID[id] {
			if out == nil {
				out = map[string]*v1.Pod{}
			}
			out[p.Namespace+"/"+p.Name] = p
			w.forgetLocked(uid)
		}
	}
	w.n.Store(int64(len(w.ids)))
	return out
}

// required is what PreFilter leaves the Filter: the profiles the pod needs installed, and the
// waiting generation the cycle's reads of the install states follow.
type required struct {
	ids []string
	gen uint64
	// noted: the pod is noted once per cycle, not once per refused node.
	noted atomic.Bool
}

// Clone shares the value: a cycle's clones note the same pod at most once between them.
func (r *required) Clone() fwk.StateData { return r }

// noteRefused records that this cycle refused pod a node for a profile not installed.
func (pl *SySched) noteRefused(req *required, pod *v1.Pod) {
	if !req.noted.CompareAndSwap(false, true) {
		return
	}
	w := pl.st.waiting
	w.note(pod, req.ids)
	if w.gen.Load() != req.gen {
		// A change came between this cycle's reads and the note, and its release could not
		// see the pod: retry it now. The queue requeues a pod still in its cycle when the
		// cycle ends.
		pl.activate(map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}
}

// released hands back to the queue the pods a change of the install states may let fit.
func (pl *SySched) released(ids []string) {
	if pods := pl.st.waiting.release(ids); len(pods) > 0 {
		pl.activate(pods)
	}
}

func (pl *SySched) activate(pods map[string]*v1.Pod) {
	podsRetried.Add(float64(len(pods)))
	pl.st.logger.V(4).Info("Retrying pods a profile install may let fit", "pods", len(pods))
	pl.handle.Activate(pl.st.logger, pods)
}
