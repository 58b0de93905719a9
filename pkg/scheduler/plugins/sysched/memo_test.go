package sysched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Random churn of the nodes' pods (Reserve, Unreserve, pods bound or moved by the informer,
// pods deleted), of the incoming pod's profile, of the profiles themselves and of the memo's
// pruning: after every step the ExS PreScore prepares for each node equals the one computed
// afresh, and unchanged nodes are reused rather than computed.
func TestPreparedScoresEqualFreshScoresUnderChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			e := newEnv(t, shapeCluster, nil,
				seccompProfile("", "all-syscalls", "", "a", "b", "c", "d", "e", "f"),
				seccompProfile("", "ab", "", "a", "b"), seccompProfile("", "cd", "", "c", "d"),
				seccompProfile("", "ef", "", "e", "f"))
			ctx := context.Background()
			r := rand.New(rand.NewPCG(seed, 0))
			names := []string{"n1", "n2", "n3", "n4", "n5"}
			infos := make([]fwk.NodeInfo, len(names))
			for i, n := range names {
				infos[i] = nodeInfo(n)
			}
			profilesIn := []string{"ab", "cd", "ef", "all-syscalls"}
			pods := map[string]*v1.Pod{}
			pod := func(i int) *v1.Pod {
				name := fmt.Sprint("p", i)
				if pods[name] == nil {
					pods[name] = e.newPod(name, withPodProfile(e.path("", profilesIn[i%len(profilesIn)])))
				}
				return pods[name]
			}
			incoming := pod(0)
			var reused int64
			for step := 0; step < 400; step++ {
				switch op := r.IntN(12); {
				case op < 4:
					p := pod(r.IntN(20))
					ps := e.pl.st.podSet(p)
					e.pl.st.addPod(p, names[r.IntN(len(names))], true, &ps)
				case op < 6:
					p := pod(r.IntN(20))
					e.pl.Unreserve(ctx, nil, p, p.Spec.NodeName)
					e.pl.st.removePod(p.UID, "")
				case op < 8:
					// The informer: bound (or moved) by anyone.
					e.pl.st.addPod(pod(r.IntN(20)), names[r.IntN(len(names))], false, nil)
				case op < 9:
					incoming = pod(r.IntN(20))
				case op < 10:
					// The next PreScore prunes empty node states.
					e.pl.memo.cycles = pruneEvery - 1
				case op < 11:
					// A profile changes under the pods using it.
					sys := []string{"a", "b"}
					if r.IntN(2) == 0 {
						sys = append(sys, "c")
					}
					e.updateProfile(seccompProfile("", "ab", "", sys...))
					want := len(sys)
					e.eventually("profile update", func() bool { return e.setSize(e.newPod("probe", withPodProfile(e.path("", "ab")))) == want })
				default:
					// Nothing changes: the next cycle reuses every score.
				}
				before, _ := e.pl.memo.Counts()
				cs := framework.NewCycleState()
				if st := e.pl.PreScore(ctx, cs, incoming, infos); !st.IsSuccess() {
					t.Fatalf("step %d: PreScore: %v", step, st)
				}
				after, _ := e.pl.memo.Counts()
				reused += after - before
				set := e.pl.st.podSet(incoming).set
				for i, ni := range infos {
					got, ok := e.pl.memo.Score(cs, ni)
					if !ok {
						t.Fatalf("step %d: node %s has no prepared score", step, names[i])
					}
					if want := e.pl.st.score(names[i], set); got != want {
						t.Fatalf("step %d: node %s prepared ExS %d, fresh %d", step, names[i], got, want)
					}
				}
			}
			if reused == 0 {
				t.Fatal("no score was ever reused")
			}
		})
	}
}
