package instanceisolation

import (
	"context"
	"fmt"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

var podSeq int

// pb builds pods for tests.
type pb struct{ p *v1.Pod }

func newPod(ns string) *pb {
	podSeq++
	return &pb{p: &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: fmt.Sprintf("p%d", podSeq), UID: types.UID(fmt.Sprintf("uid-%d", podSeq)),
		Labels: map[string]string{}, Annotations: map[string]string{},
	}}}
}

func (b *pb) label(k, v string) *pb       { b.p.Labels[k] = v; return b }
func (b *pb) class(c string) *pb          { return b.label("ipp-class", c) }
func (b *pb) on(node string) *pb          { b.p.Spec.NodeName = node; return b }
func (b *pb) mirror() *pb                 { b.p.Annotations[MirrorPodAnnotation] = "x"; return b }
func (b *pb) phase(ph v1.PodPhase) *pb    { b.p.Status.Phase = ph; return b }
func (b *pb) owned(kind, name string) *pb { return b.ownedUID(kind, name, types.UID(kind+"-"+name)) }
func (b *pb) ownedUID(kind, name string, uid types.UID) *pb {
	t := true
	b.p.OwnerReferences = append(b.p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name, UID: uid, Controller: &t})
	return b
}
func (b *pb) pod() *v1.Pod { return b.p }

// nodeInfo is a snapshot NodeInfo holding pods.
func nodeInfo(name string, pods ...*v1.Pod) fwk.NodeInfo { return plugintest.NodeInfo(name, pods...) }

func mustArgs(t testing.TB, a *Args) *Args {
	t.Helper()
	out, err := ParseArgs(a)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newTestPlugin(t testing.TB, a *Args) *InstanceIsolation {
	t.Helper()
	pl := NewWithIndex(context.Background(), mustArgs(t, a), NewIndex(), sharedTestGrants())
	pl.FollowGrants()
	return pl
}

// testNamespaces are the namespaces the tests' pods use.
var testNamespaces = []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "infra"}

// sharedTestGrants shares every class value the older tests use between all their
// namespaces, as an InstanceClass per value would: those tests were written when a class value
// was one class cluster-wide, which is exactly what the migration's InstanceClasses keep
// (README.md, "Classes belong to namespaces"). classes_test.go tests the namespace-owned
// default.
func sharedTestGrants() *Grants {
	g := NewGrants()
	for _, v := range []string{"a", "b", "c", "z"} {
		g.Set(v, testNamespaces)
	}
	for i := 0; i < 50; i++ {
		g.Set(fmt.Sprint("c", i), testNamespaces)
	}
	return g
}

func boolp(b bool) *bool { return &b }

// filter runs PreFilter then Filter on node (holding pods in the snapshot) as the framework
// would; a PreFilter Skip means the node passes (Filter is not called).
func filter(pl *InstanceIsolation, pod *v1.Pod, node string, pods ...*v1.Pod) *fwk.Status {
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		if s.IsSkip() {
			return nil
		}
		return s
	}
	return pl.Filter(ctx, cs, pod, nodeInfo(node, pods...))
}
