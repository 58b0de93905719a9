// Package loadawaretest has test doubles shared by the load-aware plugins' tests: a load
// watcher on httptest, node and pod builders, and a framework handle with only an informer
// factory.
package loadawaretest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// Watcher is a fake load watcher. Zero behaviour: 500 until a document is set.
type Watcher struct {
	*httptest.Server
	mu  sync.Mutex
	doc *loadapi.Response
	// load, when set, is served to requests whose Accept names loadapi.LoadMediaType (a watcher
	// that knows Berth's typed form); others get doc.
	load     *loadapi.Load
	accept   string
	status   int
	raw      []byte
	hang     bool
	Requests atomic.Int64
	// LastQuery is the raw query of the last request.
	lastQuery string
}

// NewWatcher starts the server; Close it when done.
func NewWatcher() *Watcher {
	w := &Watcher{}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	return w
}

func (w *Watcher) serve(rw http.ResponseWriter, r *http.Request) {
	w.Requests.Add(1)
	w.mu.Lock()
	w.lastQuery = r.URL.RawQuery
	w.accept = r.Header.Get("Accept")
	doc, load, status, raw, hang := w.doc, w.load, w.status, w.raw, w.hang
	w.mu.Unlock()
	if r.URL.Path != watcher.BaseUrl {
		http.NotFound(rw, r)
		return
	}
	if hang {
		<-r.Context().Done()
		return
	}
	if status != 0 && status != http.StatusOK {
		http.Error(rw, "unable to get any latest metrics", status)
		return
	}
	if load != nil && raw == nil && strings.Contains(r.Header.Get("Accept"), loadapi.LoadMediaType) {
		rw.Header().Set("Content-Type", loadapi.LoadMediaType)
		_ = json.NewEncoder(rw).Encode(load)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	if raw != nil {
		_, _ = rw.Write(raw)
		return
	}
	if doc == nil {
		http.Error(rw, "unable to get any latest metrics", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(rw).Encode(doc)
}

// Set serves doc with 200 from now on, in the upstream form only (an upstream watcher, or a
// Berth watcher older than the typed form).
func (w *Watcher) Set(doc *loadapi.Response) {
	w.mu.Lock()
	w.doc, w.load, w.status, w.raw, w.hang = doc, nil, 0, nil, false
	w.mu.Unlock()
}

// SetBoth serves load to clients asking for Berth's typed form and doc to the others, as
// Berth's watcher does.
func (w *Watcher) SetBoth(load *loadapi.Load, doc *loadapi.Response) {
	w.mu.Lock()
	w.doc, w.load, w.status, w.raw, w.hang = doc, load, 0, nil, false
	w.mu.Unlock()
}

// Accept returns the Accept header of the last request.
func (w *Watcher) Accept() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.accept
}

// Fail answers with status.
func (w *Watcher) Fail(status int) {
	w.mu.Lock()
	w.status, w.raw, w.hang = status, nil, false
	w.mu.Unlock()
}

// Garbage answers 200 with body.
func (w *Watcher) Garbage(body string) {
	w.mu.Lock()
	w.status, w.raw, w.hang = 0, []byte(body), false
	w.mu.Unlock()
}

// Hang makes requests block until the client gives up.
func (w *Watcher) Hang() {
	w.mu.Lock()
	w.hang = true
	w.mu.Unlock()
}

// Query returns the parsed query of the last request.
func (w *Watcher) Query() url.Values {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, _ := url.ParseQuery(w.lastQuery)
	return q
}

// Metric builds one metric.
func Metric(typ, op string, value float64) watcher.Metric {
	return watcher.Metric{Name: "test", Type: typ, Operator: op, Rollup: "15m", Value: value}
}

// Doc builds an upstream-shaped document stamped at ts (no berthNodes).
func Doc(ts time.Time, nodes map[string][]watcher.Metric) *loadapi.Response {
	d := &loadapi.Response{}
	d.Timestamp = ts.Unix()
	d.Window = watcher.Window{Duration: watcher.FifteenMinutes, Start: ts.Add(-15 * time.Minute).Unix(), End: ts.Unix()}
	d.Source = "test"
	d.Data.NodeMetricsMap = watcher.NodeMetricsMap{}
	for n, ms := range nodes {
		d.Data.NodeMetricsMap[n] = watcher.NodeMetrics{Metrics: ms}
	}
	return d
}

// CPUDoc is Doc with one "CPU Latest" metric per node.
func CPUDoc(ts time.Time, cpuPercent map[string]float64) *loadapi.Response {
	nodes := map[string][]watcher.Metric{}
	for n, v := range cpuPercent {
		nodes[n] = []watcher.Metric{Metric(watcher.CPU, watcher.Latest, v)}
	}
	return Doc(ts, nodes)
}

// Node builds a node whose capacity and allocatable are milliCPU and memBytes.
func Node(name string, milliCPU, memBytes int64) *v1.Node {
	rl := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     v1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy()},
	}
}

// Pod builds a pod with one container per entry of cpuRequests (milliCPU, 0 = none).
func Pod(name string, cpuRequests ...int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, m := range cpuRequests {
		c := v1.Container{Name: "c" + string(rune('0'+i))}
		if m > 0 {
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

// Handle is a framework handle that only provides an informer factory; anything else panics,
// which is what a test wants if a plugin starts depending on more.
type Handle struct {
	fwk.Handle
	Factory informers.SharedInformerFactory
}

// SharedInformerFactory implements fwk.Handle.
func (h *Handle) SharedInformerFactory() informers.SharedInformerFactory { return h.Factory }
