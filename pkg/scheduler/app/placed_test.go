package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

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
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, placedload.Path, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d, want 405", rec.Code)
	}
}
