package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/placedload"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/targetloadpacking"
)

// The endpoint serves what the running plugin adds for a pod it placed and no report includes
// yet, per profile and plugin, read from the plugin's own engine.
func TestPlacedServesUnreportedLoad(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	ctx := context.Background()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"node-1": 10, "node-2": 20}))
	r := &placedRegistry{}
	f := r.wrap(targetloadpacking.Name, func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return targetloadpacking.NewWithOptions(ctx, obj, h, loadaware.Options{NoLoop: true})
	})
	p, err := f(ctx, &runtime.Unknown{Raw: []byte(`{"watcherAddress":"` + w.URL + `"}`), ContentType: runtime.ContentTypeJSON},
		&plugintest.Handle{Profile: "berth-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	tlp := p.(*targetloadpacking.TargetLoadPacking)
	if err := tlp.Engine().Watcher.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st := tlp.Reserve(ctx, framework.NewCycleState(), lat.Pod("pod-1", 300), "node-1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, placedload.Path, nil))
	var ans placedload.Answer
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	want := tlp.Engine().Node("node-1").Unreported
	if len(ans.Profiles) != 1 || ans.Profiles[0].Profile != "berth-scheduler" || ans.Profiles[0].Plugin != targetloadpacking.Name ||
		len(ans.Profiles[0].Nodes) != 1 || ans.Profiles[0].Nodes["node-1"].MilliCPU != want.MilliCPU || want.MilliCPU == 0 {
		t.Fatalf("answer %+v, want berth-scheduler/TargetLoadPacking with node-1 at %d millicores only", ans, want.MilliCPU)
	}
	// why: a bare pod has no workload profile; the answer says how many pods the load is.
	if l := ans.Profiles[0].Nodes["node-1"]; l.Pods != 1 || l.FromProfile != 0 {
		t.Fatalf("node-1 says %d pods, %d from a profile; want 1, 0", l.Pods, l.FromProfile)
	}
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, placedload.Path, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d, want 405", rec.Code)
	}
}

// A placed pod the agent has measured is served as Score counts it (its measured use less its
// window share, converted with the node's capacity from the scheduler's node informer), not by
// the time rule that applies by node name alone and overstates it.
func TestPlacedServesMeasuredUseAsScoreDoes(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := lat.Node("node-1", 4000, 1<<30)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(node), 0)
	r := &placedRegistry{}
	f := r.wrap(targetloadpacking.Name, func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return targetloadpacking.NewWithOptions(ctx, obj, h, loadaware.Options{NoLoop: true})
	})
	p, err := f(ctx, &runtime.Unknown{Raw: []byte(`{"watcherAddress":"` + w.URL + `"}`), ContentType: runtime.ContentTypeJSON},
		&plugintest.Handle{Profile: "berth-scheduler", Factory: factory})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tlp := p.(*targetloadpacking.TargetLoadPacking)
	placed := lat.Pod("placed", 1000) // 1500m predicted
	tlp.Engine().Tracker.Add(placed, "node-1", time.Now().Add(-time.Minute))
	// The agent lists the pod and measured it at 5 % of the node (200m), 1 % in the window.
	doc := lat.CPUDoc(time.Now(), map[string]float64{"node-1": 20})
	doc.Nodes = map[string]loadapi.NodeStatus{"node-1": {Updated: time.Now().Unix(), PodUIDs: []string{string(placed.UID)},
		Pods: []loadapi.PodUsage{{UID: string(placed.UID), Latest: loadapi.Latest{CPU: 5}, Windows: []loadapi.PodWindow{{Window: "15m", CPU: 1}}}}}}
	w.Set(doc)
	if err := tlp.Engine().Watcher.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	scored := tlp.Engine().NodeOf(node).Unreported.MilliCPU
	byName := tlp.Engine().Node("node-1").Unreported.MilliCPU
	if scored < 150 || scored > 170 || byName <= scored {
		t.Fatalf("Score counts %dm (want about 160m: 5 %% − 1 %% of 4000m), the time rule %dm (want more)", scored, byName)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, placedload.Path, nil))
	var ans placedload.Answer
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	if len(ans.Profiles) != 1 || ans.Profiles[0].Nodes["node-1"].MilliCPU != scored {
		t.Fatalf("answer %+v, want node-1 at %dm (what Score counts)", ans, scored)
	}
}
