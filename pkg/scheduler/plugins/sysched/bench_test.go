package sysched

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// BenchmarkScore measures one Score call against a node holding 110 pods whose profiles have
// ~400 syscalls each (the README quotes the figure with the command that printed it).
func BenchmarkScore(b *testing.B) {
	args, _ := ParseArgs(nil)
	st := newState(klog.Background(), args)
	rng := rand.New(rand.NewSource(1))
	universe := make([]string, 460)
	for i := range universe {
		universe[i] = fmt.Sprint("sys_", i)
	}
	st.upsertProfile(&profiles.Profile{Key: profiles.Key{Name: args.DefaultProfileName}, Syscalls: universe})
	const nProfiles = 20
	for i := 0; i < nProfiles; i++ {
		perm := rng.Perm(len(universe))[:400]
		var names []string
		for _, j := range perm {
			names = append(names, universe[j])
		}
		st.upsertProfile(&profiles.Profile{Key: profiles.Key{Name: fmt.Sprint("p", i)}, Syscalls: names})
	}
	mkPod := func(i int) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("pod", i), Namespace: "default", UID: types.UID(fmt.Sprint("u", i))},
			Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{SeccompProfile: localhost(fmt.Sprintf("operator/p%d.json", i%nProfiles))},
				Containers: []v1.Container{{Name: "c"}}}}
	}
	const nodes, perNode = 10, 110
	for n := 0; n < nodes; n++ {
		for i := 0; i < perNode; i++ {
			st.addPod(mkPod(n*perNode+i), fmt.Sprint("node", n), false, nil)
		}
	}
	if st.nodes["node0"].n != perNode || st.podSet(mkPod(0)).size != 400 {
		b.Fatal("benchmark fixture not as intended")
	}
	pl := &SySched{args: args, st: st}
	ctx := context.Background()
	pod := mkPod(-1)
	pod.Spec.SecurityContext.SeccompProfile = localhost("operator/p3.json")
	cs := framework.NewCycleState()
	pl.PreScore(ctx, cs, pod, nil)
	ni := nodeInfo("node0")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, s := pl.Score(ctx, cs, pod, ni); !s.IsSuccess() {
			b.Fatal(s)
		}
	}
}
