package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// scriptLister returns what the test set last.
type scriptLister struct {
	mu   sync.Mutex
	imgs []*runtimeapi.Image
	err  error
}

func (s *scriptLister) set(err error, imgs ...*runtimeapi.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imgs, s.err = imgs, err
}

func (s *scriptLister) List(context.Context) ([]*runtimeapi.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.imgs, s.err
}

type harness struct {
	t      *testing.T
	dyn    *dynamicfake.FakeDynamicClient
	rec    *record.FakeRecorder
	reg    *prometheus.Registry
	pub    *Publisher
	clock  time.Time
	nodeID types.UID
}

func newHarness(t *testing.T, lister Lister, mut func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(),
		clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nodeID: "node-uid-1"}
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{GVR: "NodeImagesList"})
	cfg := Config{NodeName: "node-a", Lister: lister, Store: DynamicStore{Client: h.dyn}, Recorder: h.rec, Registerer: h.reg,
		Interval: time.Second, Heartbeat: time.Minute, Now: func() time.Time { return h.clock },
		GetNode: func(_ context.Context, name string) (*corev1.Node, error) {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: h.nodeID}}, nil
		}}
	if mut != nil {
		mut(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.pub = p
	return h
}

func (h *harness) sync() error {
	h.clock = h.clock.Add(time.Second)
	return h.pub.Sync(context.Background())
}

// stored reads the object back from the fake API server.
func (h *harness) stored() *berthv1alpha1.NodeImages {
	h.t.Helper()
	obj, err := DynamicStore{Client: h.dyn}.Get(context.Background(), "node-a")
	if err != nil {
		h.t.Fatalf("get NodeImages: %v", err)
	}
	return obj
}

// writes counts create/update actions since the last call.
func (h *harness) writes() []string {
	var out []string
	for _, a := range h.dyn.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			out = append(out, a.GetVerb()+"/"+a.GetSubresource())
		}
	}
	h.dyn.ClearActions()
	return out
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func cond(obj *berthv1alpha1.NodeImages, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(obj.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestPublisherWritesOnlyChanges(t *testing.T) {
	l := &scriptLister{}
	l.set(nil, img("sha256:b", 2048, []string{"redis"}, nil), img("sha256:a", 1024, []string{"nginx:1.16"}, []string{"nginx@" + d1}))
	h := newHarness(t, l, nil)

	steps := []struct {
		name       string
		change     func()
		wantWrites []string
		check      func(t *testing.T, obj *berthv1alpha1.NodeImages)
	}{
		{
			name:       "first listing creates the object, owned by the node, then its status",
			wantWrites: []string{"create/", "update/status"},
			check: func(t *testing.T, obj *berthv1alpha1.NodeImages) {
				if len(obj.OwnerReferences) != 1 || obj.OwnerReferences[0].Kind != "Node" || obj.OwnerReferences[0].UID != "node-uid-1" {
					t.Errorf("owner references %+v, want the Node node-a", obj.OwnerReferences)
				}
				if obj.Spec.NodeName != "node-a" || len(obj.Spec.Images) != 2 || obj.Spec.Images[0].ID != "sha256:a" ||
					obj.Spec.Images[0].Tags[0] != "docker.io/library/nginx:1.16" {
					t.Errorf("spec %+v", obj.Spec)
				}
				if obj.Status.ImageCount != 2 || obj.Status.TotalSizeBytes != 3072 || obj.Status.TotalSize != "3Ki" {
					t.Errorf("status counts %d %d %q, want 2 3072 3Ki", obj.Status.ImageCount, obj.Status.TotalSizeBytes, obj.Status.TotalSize)
				}
				if c := cond(obj, "Ready"); c.Status != metav1.ConditionTrue {
					t.Errorf("Ready %+v", c)
				}
				if c := cond(obj, "Stale"); c.Status != metav1.ConditionFalse {
					t.Errorf("Stale %+v", c)
				}
				if obj.Status.ObservedTime.IsZero() {
					t.Error("observedTime not set")
				}
			},
		},
		{
			// why: thousands of agents re-listing every interval must not write when nothing changed.
			name: "the same listing, reordered, writes nothing",
			change: func() {
				l.set(nil, img("sha256:a", 1024, []string{"nginx:1.16"}, []string{"nginx@" + d1}), img("sha256:b", 2048, []string{"redis"}, nil))
			},
			wantWrites: nil,
		},
		{
			name:       "a new image updates spec and status",
			change:     func() { l.set(nil, append(l.imgs, img("sha256:c", 1024, []string{"busybox"}, nil))...) },
			wantWrites: []string{"update/", "update/status"},
			check: func(t *testing.T, obj *berthv1alpha1.NodeImages) {
				if len(obj.Spec.Images) != 3 || obj.Status.ImageCount != 3 {
					t.Errorf("%d images, count %d; want 3", len(obj.Spec.Images), obj.Status.ImageCount)
				}
			},
		},
		{
			name:       "a removed image is removed",
			change:     func() { l.set(nil, l.imgs[1:]...) },
			wantWrites: []string{"update/", "update/status"},
			check: func(t *testing.T, obj *berthv1alpha1.NodeImages) {
				for _, i := range obj.Spec.Images {
					if i.ID == "sha256:a" {
						t.Errorf("sha256:a still listed")
					}
				}
			},
		},
		{
			name:       "the heartbeat refreshes observedTime only",
			change:     func() { h.clock = h.clock.Add(2 * time.Minute) },
			wantWrites: []string{"update/status"},
			check: func(t *testing.T, obj *berthv1alpha1.NodeImages) {
				if !obj.Status.ObservedTime.Time.Equal(h.clock.Truncate(time.Second)) {
					t.Errorf("observedTime %v, want %v", obj.Status.ObservedTime, h.clock)
				}
			},
		},
		{
			// why: a node deleted and re-registered under its name has a new UID; the old owner
			// reference would let the garbage collector delete the inventory.
			name:       "a re-registered node gets the owner fixed at the next heartbeat",
			change:     func() { h.nodeID = "node-uid-2"; h.clock = h.clock.Add(2 * time.Minute) },
			wantWrites: []string{"update/", "update/status"},
			check: func(t *testing.T, obj *berthv1alpha1.NodeImages) {
				if len(obj.OwnerReferences) != 1 || obj.OwnerReferences[0].UID != "node-uid-2" {
					t.Errorf("owners %+v, want node-uid-2 only", obj.OwnerReferences)
				}
			},
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.change != nil {
				s.change()
			}
			if err := h.sync(); err != nil {
				t.Fatal(err)
			}
			if got := h.writes(); strings.Join(got, ",") != strings.Join(s.wantWrites, ",") {
				t.Fatalf("writes %v, want %v", got, s.wantWrites)
			}
			if s.check != nil {
				s.check(t, h.stored())
			}
		})
	}
	if v := testutil.ToFloat64(h.pub.images); v != 2 {
		t.Errorf("berth_agent_images %v, want 2", v)
	}
}

func TestPublisherBounds(t *testing.T) {
	many := func(n int) []*runtimeapi.Image {
		var out []*runtimeapi.Image
		for i := range n {
			out = append(out, img(fmt.Sprintf("sha256:%04d", i), 1, []string{fmt.Sprintf("app%d:v1", i)}, nil))
		}
		return out
	}
	cases := []struct {
		name       string
		cfg        func(*Config)
		next       []*runtimeapi.Image
		wantReason string
	}{
		{name: "more images than --max-images", cfg: func(c *Config) { c.MaxImages = 5 }, next: many(6), wantReason: ReasonTooManyImages},
		// why: maxItems alone does not bound bytes (32 long names per image); etcd refuses
		// large requests with an error that names no cause.
		{name: "an inventory encoding past the byte limit", cfg: func(c *Config) { c.MaxObjectBytes = 700 }, next: many(8), wantReason: ReasonTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &scriptLister{}
			l.set(nil, many(3)...)
			h := newHarness(t, l, tc.cfg)
			if err := h.sync(); err != nil {
				t.Fatal(err)
			}
			before := h.stored()
			h.writes()
			h.events()

			l.set(nil, tc.next...)
			err := h.sync()
			if err == nil || !strings.Contains(err.Error(), "previous inventory is kept") {
				t.Fatalf("sync: %v, want a refusal that keeps the previous inventory", err)
			}
			obj := h.stored()
			if Hash(obj.Spec.Images) != Hash(before.Spec.Images) {
				t.Fatalf("spec changed to %d images; the previous inventory must be kept", len(obj.Spec.Images))
			}
			if c := cond(obj, "Ready"); c.Status != metav1.ConditionFalse || c.Reason != tc.wantReason {
				t.Errorf("Ready %+v, want False/%s", c, tc.wantReason)
			}
			if c := cond(obj, "Stale"); c.Status != metav1.ConditionTrue || c.Reason != tc.wantReason {
				t.Errorf("Stale %+v, want True/%s", c, tc.wantReason)
			}
			if got := h.writes(); strings.Join(got, ",") != "update/status" {
				t.Errorf("writes %v, want only the status", got)
			}
			ev := h.events()
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+tc.wantReason) || !strings.Contains(ev[0], fmt.Sprint(len(tc.next))) {
				t.Errorf("events %q, want one Warning %s naming the count %d", ev, tc.wantReason, len(tc.next))
			}
			if v := testutil.ToFloat64(h.pub.listErrors.WithLabelValues(tc.wantReason)); v != 1 {
				t.Errorf("list errors{%s} = %v, want 1", tc.wantReason, v)
			}
			// why: a failure that lasts must not write or emit on every interval.
			_ = h.sync()
			if w, e := h.writes(), h.events(); len(w) != 0 || len(e) != 0 {
				t.Errorf("repeated refusal wrote %v and emitted %v", w, e)
			}
			l.set(nil, many(2)...)
			if err := h.sync(); err != nil {
				t.Fatal(err)
			}
			if obj := h.stored(); len(obj.Spec.Images) != 2 || cond(obj, "Ready").Status != metav1.ConditionTrue || cond(obj, "Stale").Status != metav1.ConditionFalse {
				t.Errorf("after recovery: %d images, conditions %+v", len(obj.Spec.Images), obj.Status.Conditions)
			}
			if ev := h.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventInventoryRecovered) {
				t.Errorf("events %q, want one recovery", ev)
			}
		})
	}
}

// The runtime going away keeps the inventory (Stale=True with the reason), and coming back
// clears it; proved against the real CRI client and a fake runtime on a socket.
func TestPublisherStaleRuntime(t *testing.T) {
	svc := &fakeImageService{}
	svc.set(img("sha256:a", 100, []string{"nginx:1.16"}, nil), img("sha256:b", 200, []string{"redis:7"}, nil))
	rt := startFakeRuntime(t, svc)
	lister := NewCRILister(rt.socket, 2*time.Second)
	defer lister.Close(context.Background())
	h := newHarness(t, lister, nil)
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	listed := h.stored()
	h.events()

	rt.stop()
	if err := h.sync(); err == nil {
		t.Fatal("sync succeeded with the runtime stopped")
	}
	obj := h.stored()
	if Hash(obj.Spec.Images) != Hash(listed.Spec.Images) || len(obj.Spec.Images) != 2 {
		t.Fatalf("inventory changed to %+v while the runtime was away", obj.Spec.Images)
	}
	if c := cond(obj, "Stale"); c.Status != metav1.ConditionTrue || c.Reason != ReasonSocketMissing {
		t.Errorf("Stale %+v, want True/%s", c, ReasonSocketMissing)
	}
	if c := cond(obj, "Ready"); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v, want False", c)
	}
	if !obj.Status.ObservedTime.Equal(&listed.Status.ObservedTime) {
		t.Errorf("observedTime moved to %v; it must stay at the last listing %v", obj.Status.ObservedTime, listed.Status.ObservedTime)
	}
	if ev := h.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+ReasonSocketMissing) {
		t.Errorf("events %q, want one Warning %s", ev, ReasonSocketMissing)
	}
	if v := testutil.ToFloat64(h.pub.stale); v != 1 {
		t.Errorf("stale gauge %v, want 1", v)
	}

	svc.set(img("sha256:a", 100, []string{"nginx:1.16"}, nil))
	rt.start()
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	obj = h.stored()
	if len(obj.Spec.Images) != 1 || cond(obj, "Stale").Status != metav1.ConditionFalse {
		t.Errorf("after the runtime came back: %d images, Stale %+v", len(obj.Spec.Images), cond(obj, "Stale"))
	}
}

// An agent whose runtime never answered publishes nothing: an empty NodeImages would read as
// "this node has no images" and steer pods away.
func TestPublisherNeverPublishesEmptyOnFailure(t *testing.T) {
	l := &scriptLister{}
	l.set(&ListError{Reason: ReasonRuntimeUnreachable, Err: errors.New("connection refused")})
	h := newHarness(t, l, nil)
	for range 3 {
		if err := h.sync(); err == nil {
			t.Fatal("sync succeeded")
		}
	}
	if w := h.writes(); len(w) != 0 {
		t.Fatalf("writes %v with the runtime never listed", w)
	}
	ev := h.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+ReasonRuntimeUnreachable) {
		t.Errorf("events %q, want one Warning on the node", ev)
	}
	if v := testutil.ToFloat64(h.pub.listErrors.WithLabelValues(ReasonRuntimeUnreachable)); v != 3 {
		t.Errorf("errors counted %v, want 3", v)
	}
}

// An object changed by someone else (conflict) is re-read, not overwritten blindly, and the
// next listing publishes.
func TestPublisherConflict(t *testing.T) {
	l := &scriptLister{}
	l.set(nil, img("sha256:a", 1, []string{"nginx"}, nil))
	h := newHarness(t, l, nil)
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	h.dyn.PrependReactor("update", "nodeimages", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 && a.GetSubresource() == "" {
			conflicts--
			return true, nil, errConflict()
		}
		return false, nil, nil
	})
	l.set(nil, img("sha256:a", 1, []string{"nginx"}, nil), img("sha256:b", 1, []string{"redis"}, nil))
	if err := h.sync(); err == nil {
		t.Fatal("a conflicting update reported success")
	}
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if obj := h.stored(); len(obj.Spec.Images) != 2 {
		t.Fatalf("%d images after the retry, want 2", len(obj.Spec.Images))
	}
}

func TestNewValidates(t *testing.T) {
	ok := Config{NodeName: "n", Lister: &scriptLister{}, Store: DynamicStore{}, GetNode: func(context.Context, string) (*corev1.Node, error) { return nil, nil }}
	bad := ok
	bad.MaxImages = berthv1alpha1.NodeImagesMaxImages + 1
	noNode := ok
	noNode.NodeName = ""
	for name, c := range map[string]Config{"max images past the CRD limit": bad, "no node name": noNode} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func errConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: GVR.Group, Resource: GVR.Resource}, "node-a", errors.New("the object has been modified"))
}

// An agent restarted while its runtime is down finds its earlier object and marks it Stale,
// keeping the images (it has nothing better to publish).
func TestPublisherRestartWithRuntimeDown(t *testing.T) {
	l := &scriptLister{}
	l.set(nil, img("sha256:a", 1, []string{"nginx"}, nil))
	h := newHarness(t, l, nil)
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	// A new publisher on the same API, as after a restart.
	l.set(&ListError{Reason: ReasonNotCRI, Err: errors.New("unknown service runtime.v1.ImageService")})
	p2, err := New(Config{NodeName: "node-a", Lister: l, Store: DynamicStore{Client: h.dyn}, Recorder: h.rec,
		GetNode: func(context.Context, string) (*corev1.Node, error) { return nil, errors.New("unused") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Sync(context.Background()); err == nil {
		t.Fatal("sync succeeded")
	}
	obj := h.stored()
	if len(obj.Spec.Images) != 1 || cond(obj, "Stale").Status != metav1.ConditionTrue || cond(obj, "Stale").Reason != ReasonNotCRI {
		t.Fatalf("after restart with the runtime down: %d images, Stale %+v", len(obj.Spec.Images), cond(obj, "Stale"))
	}
}

// The agent's readiness follows the runtime: not ready before the first listing or while a
// listing through the CRI fails (naming why), ready while listings succeed, even when the
// listing is not published (too many images, a failed write: the runtime is fine).
func TestPublisherReady(t *testing.T) {
	svc := &fakeImageService{}
	svc.set(img("sha256:a", 100, []string{"nginx:1.16"}, nil))
	rt := startFakeRuntime(t, svc)
	lister := NewCRILister(rt.socket, 2*time.Second)
	defer lister.Close(context.Background())
	failWrites := false
	h := newHarness(t, lister, func(c *Config) { c.MaxImages = 2 })
	h.dyn.PrependReactor("*", "nodeimages", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failWrites {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	if err := h.pub.Ready(); err == nil || !strings.Contains(err.Error(), "no image listing through the CRI yet") {
		t.Fatalf("before the first listing: Ready() = %v, want not ready", err)
	}
	for _, step := range []struct {
		name     string
		do       func()
		wantSync bool   // Sync succeeds
		wantErr  string // "" = ready
	}{
		{name: "runtime answers", do: func() {}, wantSync: true},
		{name: "runtime stopped: socket gone", do: rt.stop, wantErr: ReasonSocketMissing + ": CRI socket " + rt.socket},
		{name: "runtime back", do: rt.start, wantSync: true},
		{name: "more images than the limit: not published, runtime fine", do: func() {
			svc.set(img("sha256:a", 1, []string{"a:1"}, nil), img("sha256:b", 1, []string{"b:1"}, nil), img("sha256:c", 1, []string{"c:1"}, nil))
		}},
		{name: "writes fail: not published, runtime fine", do: func() {
			svc.set(img("sha256:d", 1, []string{"d:1"}, nil))
			failWrites = true
		}},
		{name: "writes work again", do: func() { failWrites = false }, wantSync: true},
	} {
		step.do()
		err := h.sync()
		if (err == nil) != step.wantSync {
			t.Errorf("%s: Sync() = %v, want success %v", step.name, err, step.wantSync)
		}
		got := h.pub.Ready()
		switch {
		case step.wantErr == "" && got != nil:
			t.Errorf("%s: Ready() = %v, want ready", step.name, got)
		case step.wantErr != "" && (got == nil || !strings.Contains(got.Error(), step.wantErr)):
			t.Errorf("%s: Ready() = %v, want an error containing %q", step.name, got, step.wantErr)
		}
	}
}

// While the runtime does not answer, listings are retried every RetryInterval, not every
// Interval: an agent that is not Ready is Ready again soon after its runtime answers.
func TestPublisherRetriesSoonWhileNotReady(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retry     time.Duration
		wantReady bool
	}{
		{"retry interval shorter than the hour-long interval: ready within a second", 20 * time.Millisecond, true},
		{"retry interval capped at the interval: still waiting", 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &scriptLister{}
			l.set(&ListError{Reason: ReasonSocketMissing, Err: errors.New("CRI socket /x: no such file or directory")})
			h := newHarness(t, l, func(c *Config) { c.Interval, c.RetryInterval = time.Hour, tc.retry })
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); h.pub.Run(ctx) }()
			defer func() { cancel(); <-done }()
			deadline := time.Now().Add(2 * time.Second)
			for h.pub.Ready() == nil || !strings.Contains(h.pub.Ready().Error(), ReasonSocketMissing) {
				if time.Now().After(deadline) {
					t.Fatalf("first listing never failed: %v", h.pub.Ready())
				}
				time.Sleep(5 * time.Millisecond)
			}
			l.set(nil, img("sha256:a", 1, []string{"a:1"}, nil))
			deadline = time.Now().Add(time.Second)
			for h.pub.Ready() != nil && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := h.pub.Ready() == nil; got != tc.wantReady {
				t.Errorf("ready after a second: %v, want %v (%v)", got, tc.wantReady, h.pub.Ready())
			}
		})
	}
}
