package instanceisolation

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// randomCluster is an index and a snapshot built from the same pods, except for pods only the
// snapshot holds (another profile's reservation, a binding the index has not seen) and pods
// only the index holds (a binding the snapshot does not have yet).
type randomCluster struct {
	pl    *InstanceIsolation
	nodes []fwk.NodeInfo
	// mismatched nodes are those whose pods differ between the index and the snapshot.
	mismatched map[string]bool
}

func newRandomCluster(t *testing.T, r *rand.Rand, args *Args, nNodes int, classes []string, unknownNodes bool) *randomCluster {
	pl := newTestPlugin(t, args)
	h := pl.PodHandler()
	rc := &randomCluster{pl: pl, mismatched: map[string]bool{}}
	// why: claimed is how much of the cluster the classes hold; from nearly empty (sets of
	// hundreds) to full (a class keeps its own nodes only), so both sides of maxNodeSet occur.
	claimed := r.Float64()
	for n := 0; n < nNodes; n++ {
		name := fmt.Sprintf("n%03d", n)
		var snap []*v1.Pod
		if r.Float64() < claimed {
			cl := classes[r.Intn(len(classes))]
			for i, k := 0, 1+r.Intn(3); i < k; i++ {
				b := newPod("t1")
				switch x := r.Intn(20); {
				case x == 0: // unclassed
				case x == 1: // exempt, counted only in the pod total
					b.class(classes[r.Intn(len(classes))]).owned("DaemonSet", "ds")
				case x == 2: // a second class on the node
					b.class(classes[r.Intn(len(classes))])
				default:
					b.class(cl).owned("ReplicaSet", fmt.Sprint("rs-", cl, "-", r.Intn(2)))
				}
				p := b.on(name).pod()
				h.OnAdd(p, false)
				snap = append(snap, p)
			}
		}
		if unknownNodes {
			switch r.Intn(12) {
			case 0:
				snap = append(snap, newPod("t9").class(classes[r.Intn(len(classes))]).on(name).pod())
				rc.mismatched[name] = true
			case 1:
				h.OnAdd(newPod("t9").class(classes[r.Intn(len(classes))]).on(name).pod(), false)
				rc.mismatched[name] = true
			}
		}
		rc.nodes = append(rc.nodes, nodeInfo(name, snap...))
	}
	return rc
}

// TestPreFilterResultIsWhatFilterAccepts: on random clusters, in default, strict and spreading
// modes, PreFilter returns a node set exactly when fewer than maxNodeSet nodes may be used, and
// then every node Filter accepts is in it; every node left out is refused by Filter, also with
// a nominated pod of any class added as the framework does (AddPod on a clone). With index and
// snapshot agreeing, the set is exactly the nodes Filter accepts; where they disagree the node
// stays in and Filter decides from its pods.
func TestPreFilterResultIsWhatFilterAccepts(t *testing.T) {
	classes := []string{"a", "b", "c", "d"}
	modes := []struct {
		name string
		args *Args
	}{
		{"default", nil},
		{"strict", &Args{Strict: boolp(true)}},
		{"spread", &Args{SpreadReplicas: boolp(true)}},
		{"strict+spread", &Args{Strict: boolp(true), SpreadReplicas: boolp(true)}},
	}
	ctx := context.Background()
	for _, m := range modes {
		for _, unknown := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/unknownNodes=%v", m.name, unknown), func(t *testing.T) {
				sets, fulls := 0, 0
				for seed := int64(0); seed < 60; seed++ {
					r := rand.New(rand.NewSource(seed))
					rc := newRandomCluster(t, r, m.args, 150+r.Intn(60), classes, unknown)
					b := newPod("t1")
					if r.Intn(5) > 0 {
						cl := classes[r.Intn(len(classes))]
						b.class(cl).owned("ReplicaSet", fmt.Sprint("rs-", cl, "-0"))
					}
					pod := b.pod()
					cs := framework.NewCycleState()
					res, s := rc.pl.PreFilter(ctx, cs, pod, rc.nodes)
					if s.IsSkip() {
						if res != nil {
							t.Fatalf("seed %d: Skip with a node set", seed)
						}
						continue
					}
					if !s.IsSuccess() {
						t.Fatalf("seed %d: PreFilter %v", seed, s)
					}
					accepted := map[string]bool{}
					for _, ni := range rc.nodes {
						if rc.pl.Filter(ctx, cs, pod, ni).IsSuccess() {
							accepted[ni.Node().Name] = true
						}
					}
					if res == nil {
						fulls++
						// why: without a set the framework filters every node: correct whatever
						// the count, but the set must not be withheld when the O(1) estimate is
						// exact (default mode, or strict for a pod without a class) and the
						// index agrees with the snapshot.
						exact := m.args == nil || (m.args.SpreadReplicas == nil && len(pod.Labels) == 0)
						if exact && !unknown && len(accepted) > 0 && len(accepted) < maxNodeSet {
							t.Fatalf("seed %d: %d nodes accepted, no set returned", seed, len(accepted))
						}
						continue
					}
					sets++
					if len(res.NodeNames) >= maxNodeSet || len(res.NodeNames) == 0 {
						t.Fatalf("seed %d: set of %d nodes", seed, len(res.NodeNames))
					}
					for n := range accepted {
						if !res.NodeNames.Has(n) {
							t.Fatalf("seed %d: Filter accepts %s, not in the set", seed, n)
						}
					}
					for n := range res.NodeNames {
						if !accepted[n] && !rc.mismatched[n] {
							t.Fatalf("seed %d: %s in the set, but Filter refuses it and index and snapshot agree", seed, n)
						}
					}
					// Left-out nodes stay refused with a nominated pod on them.
					for _, ni := range rc.nodes {
						name := ni.Node().Name
						if res.NodeNames.Has(name) {
							continue
						}
						nom := newPod("t5").class(classes[r.Intn(len(classes))]).pod()
						if r.Intn(4) == 0 {
							nom = newPod("t5").pod()
						}
						nom.Spec.NodeName = ""
						pi, _ := framework.NewPodInfo(nom)
						withNom := cs.Clone()
						niNom := ni.Snapshot()
						niNom.AddPodInfo(pi)
						if st := rc.pl.AddPod(ctx, withNom, pod, pi, niNom); !st.IsSuccess() {
							t.Fatal(st)
						}
						if rc.pl.Filter(ctx, withNom, pod, niNom).IsSuccess() {
							t.Fatalf("seed %d: %s left out, but Filter accepts it with a nominated pod", seed, name)
						}
					}
				}
				if sets == 0 || fulls == 0 {
					t.Fatalf("random clusters gave %d sets and %d full scans; both must occur", sets, fulls)
				}
			})
		}
	}
}

// hostNode is a NodeInfo whose node carries its hostname label, as the kubelet sets it.
func hostNode(name string, pods ...*v1.Pod) fwk.NodeInfo {
	return plugintest.NodeInfoOf(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}}, pods...)
}

// TestPreFilterResultTable: the threshold, the cases a node must stay in the set, and the
// pod's node selector.
func TestPreFilterResultTable(t *testing.T) {
	ctx := context.Background()
	build := func(nOther, nOwn, nEmpty int) (*InstanceIsolation, []fwk.NodeInfo) {
		pl := newTestPlugin(t, nil)
		h := pl.PodHandler()
		var nis []fwk.NodeInfo
		add := func(prefix string, n int, class string) {
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("%s%03d", prefix, i)
				if class == "" {
					nis = append(nis, hostNode(name))
					continue
				}
				p := newPod("t1").class(class).on(name).pod()
				h.OnAdd(p, false)
				nis = append(nis, hostNode(name, p))
			}
		}
		add("other", nOther, "b")
		add("own", nOwn, "a")
		add("empty", nEmpty, "")
		return pl, nis
	}
	tests := []struct {
		name                 string
		other, own, empty    int
		wantSet              bool
		wantSize             int
		extraSnapshotPodNode bool // a pod of class b only the snapshot holds, on an "own" node
		// hostname, when set, is the pod's nodeSelector on kubernetes.io/hostname.
		hostname string
	}{
		{"99 usable of 1000", 901, 4, 95, true, 99, false, ""},
		{"100 usable of 1000", 900, 4, 96, false, 0, false, ""},
		{"all usable", 0, 10, 990, false, 0, false, ""},
		{"none usable", 1000, 0, 0, false, 0, false, ""},
		{"only own nodes", 996, 4, 0, true, 4, false, ""},
		{"own node the index has not caught up with", 996, 4, 0, true, 4, true, ""},
		{"selector on a node of the set", 996, 4, 0, true, 4, false, "own002"},
		// why: no node of the set may take the pod; without a set its failure names the class
		// in the way on other000.
		{"selector on a refused node", 996, 4, 0, false, 0, false, "other000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, nis := build(tt.other, tt.own, tt.empty)
			if tt.extraSnapshotPodNode {
				// The snapshot holds a class b pod the index has not seen on own000: Filter
				// decides from the pods (refuses), so the node must be in the set.
				own := nis[tt.other]
				pods := []*v1.Pod{}
				for _, pi := range own.GetPods() {
					pods = append(pods, pi.GetPod())
				}
				pods = append(pods, newPod("t2").class("b").on(own.Node().Name).pod())
				nis[tt.other] = hostNode(own.Node().Name, pods...)
			}
			pod := newPod("t3").class("a").pod()
			if tt.hostname != "" {
				pod.Spec.NodeSelector = map[string]string{v1.LabelHostname: tt.hostname}
			}
			cs := framework.NewCycleState()
			res, s := pl.PreFilter(ctx, cs, pod, nis)
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			if (res != nil) != tt.wantSet {
				t.Fatalf("set returned: %v, want %v", res != nil, tt.wantSet)
			}
			if res != nil && len(res.NodeNames) != tt.wantSize {
				t.Fatalf("set of %d nodes, want %d", len(res.NodeNames), tt.wantSize)
			}
			if tt.extraSnapshotPodNode {
				own := nis[tt.other]
				if !res.NodeNames.Has(own.Node().Name) {
					t.Fatal("a node whose snapshot differs from the index must stay in the set")
				}
				if pl.Filter(ctx, cs, pod, own).IsSuccess() {
					t.Fatal("Filter must refuse it from the snapshot's pods")
				}
			}
		})
	}
}
