package images

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Defaults.
const (
	DefaultInterval = 15 * time.Second
	// DefaultRetryInterval is how soon a listing that failed through the CRI is retried.
	DefaultRetryInterval = 2 * time.Second
	DefaultHeartbeat     = 5 * time.Minute
	// DefaultMaxObjectBytes bounds StoredBytes, leaving ~170 kB of etcd's default 1.5 MiB
	// request limit for metadata, status and the estimate's error.
	DefaultMaxObjectBytes = 1_400_000
	// DefaultMaxImages is the NodeImages limit (the CRD's maxItems).
	DefaultMaxImages = berthv1alpha1.NodeImagesMaxImages
)

// Event reasons besides the listing failure reasons (cri.go).
const (
	EventInventoryRecovered = "InventoryRecovered"
	EventPublishFailed      = "PublishFailed"
)

// NodeGetter returns the node the agent runs on (for the owner reference).
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// Config of the publisher.
type Config struct {
	NodeName string
	Lister   Lister
	Store    Store
	GetNode  NodeGetter
	// Recorder emits Events on the NodeImages object (on the Node before it exists).
	Recorder record.EventRecorder
	// Interval between listings (the runtime has no image events: a re-list is the change
	// detection).
	Interval time.Duration
	// RetryInterval replaces Interval while the last listing failed through the CRI (at most
	// Interval; default DefaultRetryInterval). Why: the agent is not Ready meanwhile (Ready), and
	// should be again soon after the runtime answers, not one whole Interval later.
	RetryInterval time.Duration
	// Heartbeat: status.observedTime is refreshed at least this often while nothing changes,
	// so readers can tell a quiet node from a dead agent without a write every Interval.
	Heartbeat time.Duration
	// MaxImages: a listing with more images is not published (Ready=False, TooManyImages).
	MaxImages int
	// MaxObjectBytes: an inventory whose stored size (StoredBytes) would be larger is not
	// published (TooLarge).
	MaxObjectBytes int
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock (tests).
	Now func() time.Time
}

// Publisher keeps the node's NodeImages object in step with the runtime.
type Publisher struct {
	cfg Config

	obj *berthv1alpha1.NodeImages // last object read or written; nil before the first
	// failing is the reason of the failure state the object currently reports ("" = healthy);
	// events are emitted when it changes, not on every listing.
	failing string
	lastOK  time.Time
	// ownerRef is the Node owner reference read at ownerRead.
	ownerRef  metav1.OwnerReference
	ownerRead time.Time

	// readyMu guards listErr, which Ready reads from the HTTP server's goroutines.
	readyMu sync.Mutex
	// listErr is why the last listing through the CRI failed, nil once one succeeded; before
	// the first listing it is errNotListed.
	listErr error

	images     prometheus.Gauge
	listErrors *prometheus.CounterVec
	lastList   prometheus.Gauge
	stale      prometheus.Gauge
	writes     *prometheus.CounterVec
	dropped    *prometheus.CounterVec
}

// New validates cfg and registers the metrics.
func New(cfg Config) (*Publisher, error) {
	if cfg.NodeName == "" || cfg.Lister == nil || cfg.Store == nil || cfg.GetNode == nil {
		return nil, errors.New("images: node name, lister, store and node getter are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	cfg.RetryInterval = min(cfg.RetryInterval, cfg.Interval)
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxImages <= 0 {
		cfg.MaxImages = berthv1alpha1.NodeImagesMaxImages
	}
	if cfg.MaxImages > berthv1alpha1.NodeImagesMaxImages {
		return nil, fmt.Errorf("images: max images %d exceeds the NodeImages limit %d", cfg.MaxImages, berthv1alpha1.NodeImagesMaxImages)
	}
	if cfg.MaxObjectBytes <= 0 {
		cfg.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Publisher{cfg: cfg, listErr: errNotListed}
	p.images = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_agent_images",
		Help: "Images in the runtime's last successful listing."})
	p.listErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_image_list_errors_total",
		Help: "Image listings that failed or were not published, by reason."}, []string{"reason"})
	p.lastList = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_agent_image_last_list_timestamp_seconds",
		Help: "Unix time of the last successful image listing."})
	p.stale = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_agent_image_inventory_stale",
		Help: "1 while the published inventory is kept from an earlier listing (runtime unreachable, too many images)."})
	p.writes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_image_inventory_writes_total",
		Help: "NodeImages writes by kind (create, spec, status) and result (ok, error)."}, []string{"kind", "result"})
	p.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_image_names_dropped_total",
		Help: "Image names left out of the inventory, by reason (invalid, duplicate, truncated)."}, []string{"reason"})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.images, p.listErrors, p.lastList, p.stale, p.writes, p.dropped} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// Run lists and publishes every Interval (every RetryInterval while the runtime does not
// answer) until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("node", p.cfg.NodeName)
	log.Info("Image inventory started", "interval", p.cfg.Interval, "maxImages", p.cfg.MaxImages)
	t := time.NewTimer(p.cfg.Interval)
	defer t.Stop()
	for {
		if err := p.Sync(klog.NewContext(ctx, log)); err != nil && ctx.Err() == nil {
			log.Error(err, "Image inventory not published")
		}
		next := p.cfg.Interval
		if p.Ready() != nil {
			next = p.cfg.RetryInterval
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			log.Info("Image inventory stopped")
			return
		case <-t.C:
		}
	}
}

var errNotListed = errors.New("no image listing through the CRI yet")

// Ready is the agent's readiness for the image inventory: nil while the last listing through
// the CRI succeeded, else why it failed (the socket missing or not readable, nothing answering,
// not a CRI v1 runtime), or that none ran yet. Why readiness and not only the NodeImages
// condition: a wrong agent.criSocket must make the DaemonSet's rollout (and `helm install
// --wait`) fail where it is set, not only leave a condition on an object that may never be
// created. Only the runtime counts: an inventory over the limits or a failed write is the
// node's or the API server's state, shown on the object and in events, and the agent's
// listing still works. Readiness takes nothing else down: the load reports are pushed.
func (p *Publisher) Ready() error {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	return p.listErr
}

func (p *Publisher) setListErr(err error) {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	p.listErr = err
}

// Sync does one listing and publishes its outcome. It returns an error when the inventory
// could not be listed or written; the published object then keeps its previous images.
func (p *Publisher) Sync(ctx context.Context) error {
	log := klog.FromContext(ctx)
	lctx, cancel := context.WithTimeout(ctx, max(p.cfg.Interval, 5*time.Second))
	raw, err := p.cfg.Lister.List(lctx)
	cancel()
	p.setListErr(err)
	if err != nil {
		reason := ReasonOf(err)
		p.listErrors.WithLabelValues(reason).Inc()
		return errors.Join(err, p.fail(ctx, reason, "runtime not listed: "+err.Error()))
	}
	now := p.cfg.Now()
	p.lastList.Set(float64(now.Unix()))
	inv := Build(raw)
	p.dropped.WithLabelValues("invalid").Add(float64(inv.Stats.InvalidRefs))
	p.dropped.WithLabelValues("duplicate").Add(float64(inv.Stats.DuplicateRefs))
	p.dropped.WithLabelValues("truncated").Add(float64(inv.Stats.TruncatedRefs))
	if n := len(inv.Images); n > p.cfg.MaxImages {
		p.listErrors.WithLabelValues(ReasonTooManyImages).Inc()
		err := fmt.Errorf("the runtime lists %d images, more than the limit of %d (--max-images); the previous inventory is kept", n, p.cfg.MaxImages)
		return errors.Join(err, p.fail(ctx, ReasonTooManyImages, err.Error()))
	}
	if b := StoredBytes(p.cfg.NodeName, inv.Images); b > p.cfg.MaxObjectBytes {
		p.listErrors.WithLabelValues(ReasonTooLarge).Inc()
		err := fmt.Errorf("the inventory of %d images would be stored in about %d bytes, more than the limit of %d; the previous inventory is kept", len(inv.Images), b, p.cfg.MaxObjectBytes)
		return errors.Join(err, p.fail(ctx, ReasonTooLarge, err.Error()))
	}
	p.images.Set(float64(len(inv.Images)))
	if err := p.publish(ctx, inv, now); err != nil {
		return err
	}
	if p.failing != "" {
		p.event(corev1.EventTypeNormal, EventInventoryRecovered, fmt.Sprintf("Listed %d images through the CRI again (after %s)", len(inv.Images), p.failing))
		log.Info("Image inventory recovered", "after", p.failing, "images", len(inv.Images))
	}
	p.failing = ""
	p.lastOK = now
	p.stale.Set(0)
	return nil
}

// load reads the object once (at start, and after a conflict or a deletion).
func (p *Publisher) load(ctx context.Context) error {
	if p.obj != nil {
		return nil
	}
	obj, err := p.cfg.Store.Get(ctx, p.cfg.NodeName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	p.obj = obj
	return nil
}

// publish writes a successful listing: the spec when the images changed (or the owner), the
// status when the spec was written, the conditions change or the heartbeat is due.
func (p *Publisher) publish(ctx context.Context, inv Inventory, now time.Time) error {
	if err := p.load(ctx); err != nil {
		return err
	}
	owner, err := p.owner(ctx, now)
	if err != nil {
		return err
	}
	hash := Hash(inv.Images)
	if p.obj == nil {
		obj := &berthv1alpha1.NodeImages{
			ObjectMeta: metav1.ObjectMeta{Name: p.cfg.NodeName, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       berthv1alpha1.NodeImagesSpec{NodeName: p.cfg.NodeName, Images: inv.Images},
		}
		created, err := p.cfg.Store.Create(ctx, obj)
		p.countWrite("create", err)
		if apierrors.IsAlreadyExists(err) {
			return p.retryLater(err)
		}
		if err != nil {
			return fmt.Errorf("creating NodeImages %s: %w", p.cfg.NodeName, err)
		}
		p.obj = created
		klog.FromContext(ctx).Info("NodeImages created", "images", len(inv.Images), "totalSizeBytes", inv.TotalSizeBytes)
	} else if Hash(p.obj.Spec.Images) != hash || p.obj.Spec.NodeName != p.cfg.NodeName || !ownedBy(p.obj, owner) {
		obj := p.obj.DeepCopy()
		obj.Spec = berthv1alpha1.NodeImagesSpec{NodeName: p.cfg.NodeName, Images: inv.Images}
		obj.OwnerReferences = withOwner(obj.OwnerReferences, owner)
		updated, err := p.cfg.Store.Update(ctx, obj)
		p.countWrite("spec", err)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return p.retryLater(err)
		}
		if err != nil {
			return fmt.Errorf("updating NodeImages %s: %w", p.cfg.NodeName, err)
		}
		klog.FromContext(ctx).V(2).Info("NodeImages updated", "images", len(inv.Images), "before", len(p.obj.Spec.Images))
		p.obj = updated
	}

	st := p.obj.Status.DeepCopy()
	st.ImageCount = int32(len(inv.Images))
	st.TotalSizeBytes = inv.TotalSizeBytes
	st.TotalSize = resource.NewQuantity(inv.TotalSizeBytes, resource.BinarySI).String()
	gen := p.obj.Generation
	c1 := meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: berthv1alpha1.NodeImagesConditionReady, Status: metav1.ConditionTrue,
		Reason: "Listed", Message: fmt.Sprintf("%d images listed through the CRI", len(inv.Images)), ObservedGeneration: gen})
	c2 := meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: berthv1alpha1.NodeImagesConditionStale, Status: metav1.ConditionFalse,
		Reason: "Listed", Message: "the inventory is the runtime's last listing", ObservedGeneration: gen})
	due := now.Sub(p.obj.Status.ObservedTime.Time) >= p.cfg.Heartbeat
	if !c1 && !c2 && !due && st.ImageCount == p.obj.Status.ImageCount && st.TotalSizeBytes == p.obj.Status.TotalSizeBytes &&
		st.TotalSize == p.obj.Status.TotalSize {
		return nil
	}
	st.ObservedTime = metav1.NewTime(now.Truncate(time.Second))
	return p.writeStatus(ctx, st)
}

// owner is the Node owner reference, read at most once per heartbeat (a node re-registered
// under the same name gets a new UID; the next spec or heartbeat write then fixes the owner).
func (p *Publisher) owner(ctx context.Context, now time.Time) (metav1.OwnerReference, error) {
	if p.ownerRef.UID != "" && now.Sub(p.ownerRead) < p.cfg.Heartbeat {
		return p.ownerRef, nil
	}
	node, err := p.cfg.GetNode(ctx, p.cfg.NodeName)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("reading node %s for the owner reference: %w", p.cfg.NodeName, err)
	}
	p.ownerRef = metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	p.ownerRead = now
	return p.ownerRef, nil
}

// fail publishes a failure: the images stay as they are, Ready=False and Stale=True carry the
// reason, an Event marks the start of each failure state.
func (p *Publisher) fail(ctx context.Context, reason, msg string) error {
	p.stale.Set(1)
	if p.failing != reason {
		p.event(corev1.EventTypeWarning, reason, msg)
		klog.FromContext(ctx).Info("Image inventory kept from the last listing", "reason", reason, "message", msg, "lastListed", p.lastOK)
	}
	p.failing = reason
	if err := p.load(ctx); err != nil {
		return err
	}
	if p.obj == nil {
		// Never create an empty inventory: no object reads as "unknown", an empty one as "this
		// node has no images", which would steer pods away from it.
		return nil
	}
	st := p.obj.Status.DeepCopy()
	gen := p.obj.Generation
	c1 := meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: berthv1alpha1.NodeImagesConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: gen})
	c2 := meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: berthv1alpha1.NodeImagesConditionStale, Status: metav1.ConditionTrue,
		Reason: reason, Message: "images as listed at status.observedTime; " + msg, ObservedGeneration: gen})
	if !c1 && !c2 {
		return nil
	}
	return p.writeStatus(ctx, st)
}

func (p *Publisher) writeStatus(ctx context.Context, st *berthv1alpha1.NodeImagesStatus) error {
	obj := p.obj.DeepCopy()
	obj.Status = *st
	updated, err := p.cfg.Store.UpdateStatus(ctx, obj)
	p.countWrite("status", err)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return p.retryLater(err)
	}
	if err != nil {
		p.event(corev1.EventTypeWarning, EventPublishFailed, "updating the NodeImages status: "+err.Error())
		return fmt.Errorf("updating NodeImages %s status: %w", p.cfg.NodeName, err)
	}
	p.obj = updated
	return nil
}

// retryLater forgets the cached object, so the next Sync re-reads (or re-creates) it.
func (p *Publisher) retryLater(err error) error {
	p.obj = nil
	return fmt.Errorf("NodeImages %s changed underneath, re-read next time: %w", p.cfg.NodeName, err)
}

func (p *Publisher) countWrite(kind string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	p.writes.WithLabelValues(kind, result).Inc()
}

// event records on the NodeImages object, or on the Node while there is none.
func (p *Publisher) event(typ, reason, msg string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: p.cfg.NodeName, UID: p.ownerRef.UID}
	if p.obj != nil {
		ref = &corev1.ObjectReference{APIVersion: berthv1alpha1.GroupVersion.String(), Kind: "NodeImages", Name: p.obj.Name,
			UID: p.obj.UID, ResourceVersion: p.obj.ResourceVersion}
	}
	p.cfg.Recorder.Event(ref, typ, reason, msg)
}

func ownedBy(obj *berthv1alpha1.NodeImages, owner metav1.OwnerReference) bool {
	for _, o := range obj.OwnerReferences {
		if o.Kind == owner.Kind && o.APIVersion == owner.APIVersion && o.Name == owner.Name && o.UID == owner.UID {
			return true
		}
	}
	return false
}

// withOwner replaces any Node owner (a node re-registered under the same name has a new UID).
func withOwner(refs []metav1.OwnerReference, owner metav1.OwnerReference) []metav1.OwnerReference {
	out := []metav1.OwnerReference{owner}
	for _, o := range refs {
		if o.Kind == "Node" && o.APIVersion == "v1" {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Object is the last NodeImages read or written (tests).
func (p *Publisher) Object() *berthv1alpha1.NodeImages { return p.obj }
