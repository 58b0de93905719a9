// Package podnet is the node agent's PodConfig executor: for the pods of its own node that a
// PodConfig selects, on PodNetworks that grant the PodConfig's namespace (checked again here,
// with the node's own ranges), it creates the attachments the operator allocated (the
// network's bridge with the gateway, a veth pair with one end in the pod's sandbox, the
// address, routes and MTU), removes exactly what it created when an entry goes Removing, sweeps links no
// allocation accounts for, and reports each entry's result by server-side apply with field
// manager berth-agent/<node>. See README.md and /pkg/podconfig/README.md for the contract.
package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// GVRs of the contract's objects.
var (
	PodConfigGVR    = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "podconfigs"}
	IPAllocationGVR = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "ipallocations"}
	PodNetworkGVR   = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "podnetworks"}
)

// DefaultResync is how often every entry of the node is re-checked (a sandbox recreated
// without a pod update, a link deleted by hand) and stale links are swept.
const DefaultResync = 30 * time.Second

// sweepKey is the queue key of the node-wide sweep (no PodConfig key is empty).
const sweepKey = ""

// Config of an Executor.
type Config struct {
	NodeName string
	// Resolver finds sandboxes (CRIResolver); Dataplane makes links (Links).
	Resolver  Resolver
	Dataplane Dataplane
	// Status writes the node's entries (DynamicStatus).
	Status StatusApplier
	// Policy is the administrator's (chart values podConfig.*, the agent's --podconfig-*
	// flags, the same as the operator's): every network is checked against it, and against
	// the node's own ranges, again before a link is touched. An empty BridgePrefix is
	// podconfig.DefaultBridgePrefix.
	Policy podconfig.Policy
	// Resync (default DefaultResync).
	Resync time.Duration
	// Registerer receives the metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Now is the clock (tests).
	Now func() time.Time
}

// StatusApplier applies the node's entries of one PodConfig.
type StatusApplier interface {
	Apply(ctx context.Context, namespace, name string, entries []berthv1alpha1.PodAttachmentStatus) error
}

// Executor reconciles the node's attachments.
type Executor struct {
	cfg Config

	podConfigs cache.Indexer // *PodConfig
	allocs     cache.Indexer // *IPAllocation
	networks   cache.Indexer // *PodNetwork
	namespaces corelisters.NamespaceLister
	pods       corelisters.PodLister

	queue workqueue.TypedRateLimitingInterface[string]

	synced []cache.InformerSynced
	// runtimeSeen: the container runtime answered once (readiness); runtimeErr is why not yet.
	runtimeSeen atomic.Bool
	runtimeErr  atomic.Pointer[string]
	pingEvery   time.Duration

	syncs, applies, swept, writes *prometheus.CounterVec
	attachments                   *prometheus.GaugeVec
	applySeconds                  prometheus.Histogram
}

// New builds an executor over the given stores (tests fill them directly; NewForCluster wires
// informers).
func New(cfg Config, podConfigs, allocs, networks cache.Indexer, namespaces corelisters.NamespaceLister, pods corelisters.PodLister) (*Executor, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("podnet: node name is required")
	}
	if cfg.Resolver == nil || cfg.Dataplane == nil || cfg.Status == nil {
		return nil, errors.New("podnet: resolver, dataplane and status writer are required")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy.BridgePrefix == "" {
		cfg.Policy.BridgePrefix = podconfig.DefaultBridgePrefix
	}
	if err := cfg.Policy.Check(); err != nil {
		return nil, fmt.Errorf("podnet: %w", err)
	}
	e := &Executor{cfg: cfg, podConfigs: podConfigs, allocs: allocs, networks: networks, namespaces: namespaces, pods: pods, pingEvery: retryAfter,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "podnet"})}
	e.syncs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_podnet_syncs_total",
		Help: "PodConfig reconciles of this node's entries by result (ok, error)."}, []string{"result"})
	e.applies = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_podnet_results_total",
		Help: "Attachment results written by state (Configured, Failed, Removed)."}, []string{"state"})
	e.swept = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_podnet_swept_total",
		Help: "Links removed because no allocation or live attachment accounts for them any more, by kind (peer, bridge, vlan)."}, []string{"kind"})
	e.writes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_podnet_status_writes_total",
		Help: "Server-side applies of PodConfig status by result (ok, error)."}, []string{"result"})
	e.attachments = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "berth_agent_podnet_attachments",
		Help: "This node's PodConfig entries by state, as of the last sweep."}, []string{"state"})
	e.applySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "berth_agent_podnet_apply_seconds",
		Help: "Time to make one attachment (netlink calls included).", Buckets: prometheus.ExponentialBuckets(0.001, 3, 9)})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{e.syncs, e.applies, e.swept, e.writes, e.attachments, e.applySeconds} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// NewForCluster wires the informers: PodConfigs, PodNetworks, IPAllocations and Namespaces of
// the whole cluster (read only) and the pods of this node (field selector spec.nodeName).
func NewForCluster(cfg Config, kube kubernetes.Interface, dyn dynamic.Interface) (*Executor, func(<-chan struct{}), error) {
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	pcInf := df.ForResource(PodConfigGVR).Informer()
	alInf := df.ForResource(IPAllocationGVR).Informer()
	pnInf := df.ForResource(PodNetworkGVR).Informer()
	// Typed objects in the stores: converted once per event, not on every read.
	if err := pcInf.SetTransform(toTyped[berthv1alpha1.PodConfig]); err != nil {
		return nil, nil, err
	}
	if err := alInf.SetTransform(toTyped[berthv1alpha1.IPAllocation]); err != nil {
		return nil, nil, err
	}
	if err := pnInf.SetTransform(toTyped[berthv1alpha1.PodNetwork]); err != nil {
		return nil, nil, err
	}
	nsf := informers.NewSharedInformerFactory(kube, 0)
	nsInf := nsf.Core().V1().Namespaces()
	kf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	podInf := kf.Core().V1().Pods()
	e, err := New(cfg, pcInf.GetIndexer(), alInf.GetIndexer(), pnInf.GetIndexer(), nsInf.Lister(), podInf.Lister())
	if err != nil {
		return nil, nil, err
	}
	e.synced = []cache.InformerSynced{pcInf.HasSynced, alInf.HasSynced, pnInf.HasSynced, nsInf.Informer().HasSynced, podInf.Informer().HasSynced}
	_, _ = pcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.enqueueObj(o) },
		UpdateFunc: func(_, o any) { e.enqueueObj(o) },
		DeleteFunc: func(any) { e.queue.Add(sweepKey) },
	})
	on := func(inf cache.SharedIndexInformer, f func(o any)) {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			f(o)
		}})
	}
	// An allocation or a network change may concern any PodConfig and any link.
	all := func(any) { e.enqueueAll(); e.queue.Add(sweepKey) }
	on(alInf, all)
	on(pnInf, all)
	// A namespace's labels decide its grants; a pod concerns the PodConfigs of its namespace.
	on(nsInf.Informer(), func(o any) {
		if ns, ok := o.(*corev1.Namespace); ok {
			e.enqueueNamespace(ns.Name)
		}
	})
	on(podInf.Informer(), func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			e.enqueueNamespace(p.Namespace)
		}
	})
	start := func(stop <-chan struct{}) { df.Start(stop); kf.Start(stop); nsf.Start(stop) }
	return e, start, nil
}

func toTyped[T any](o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil // a tombstone or an already converted object
	}
	t := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, err
	}
	return t, nil
}

// HasSynced reports whether the informers have synced (true without informers).
func (e *Executor) HasSynced() bool {
	for _, s := range e.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Pinger is a Resolver that can say whether its runtime answers (CRIResolver does).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ready is the executor's part of the agent's /readyz: nil once its informers (PodConfigs,
// IPAllocations, the node's pods) have synced and the container runtime has answered once.
// A runtime that goes away later does not make the agent unready: entries say so, and the
// links already made keep working.
func (e *Executor) Ready() error {
	if !e.HasSynced() {
		return errors.New("PodConfig executor: informers (podconfigs, podnetworks, ipallocations, namespaces, pods) not synced yet")
	}
	if !e.runtimeSeen.Load() {
		why := "not tried yet"
		if p := e.runtimeErr.Load(); p != nil {
			why = *p
		}
		return fmt.Errorf("PodConfig executor: container runtime not reached yet: %s", why)
	}
	return nil
}

// reachRuntime pings the runtime every pingEvery (retryAfter) until it answers once.
func (e *Executor) reachRuntime(ctx context.Context) {
	p, ok := e.cfg.Resolver.(Pinger)
	if !ok {
		e.runtimeSeen.Store(true)
		return
	}
	log := klog.FromContext(ctx)
	for {
		err := p.Ping(ctx)
		if err == nil {
			e.runtimeSeen.Store(true)
			log.Info("Container runtime reached")
			return
		}
		msg := err.Error()
		if prev := e.runtimeErr.Swap(&msg); prev == nil || *prev != msg {
			log.Error(err, "Container runtime not reachable; not ready until it answers")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.pingEvery):
		}
	}
}

func (e *Executor) enqueueObj(o any) {
	if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
		e.queue.Add(k)
	}
}

func (e *Executor) enqueueAll() {
	for _, k := range e.podConfigs.ListKeys() {
		e.queue.Add(k)
	}
}

func (e *Executor) enqueueNamespace(ns string) {
	objs, _ := e.podConfigs.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range objs {
		e.enqueueObj(o)
	}
}

// Run waits for the caches, sweeps once, then reconciles until ctx is done (one worker: the
// node's links are changed by one goroutine only).
func (e *Executor) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("node", e.cfg.NodeName)
	defer e.queue.ShutDown()
	go e.reachRuntime(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), e.synced...) {
		return
	}
	log.Info("PodConfig executor started", "resync", e.cfg.Resync)
	e.queue.Add(sweepKey)
	e.enqueueAll()
	go func() {
		t := time.NewTicker(e.cfg.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				e.queue.ShutDown()
				return
			case <-t.C:
				e.queue.Add(sweepKey)
				e.enqueueAll()
			}
		}
	}()
	for e.processNext(ctx) {
	}
	log.Info("PodConfig executor stopped")
}

func (e *Executor) processNext(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	var err error
	var requeue time.Duration
	if key == sweepKey {
		err = e.Sweep(ctx)
	} else {
		requeue, err = e.Sync(ctx, key)
	}
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "PodConfig sync failed", "key", key)
		e.queue.AddRateLimited(key)
	case requeue > 0:
		e.queue.Forget(key)
		e.queue.AddAfter(key, requeue)
	default:
		e.queue.Forget(key)
	}
	return true
}

// retryAfter is when an entry waiting for something outside the API (a sandbox being
// created, a runtime coming back, a namespace being replaced) is looked at again.
const retryAfter = 2 * time.Second

// Sync reconciles this node's entries of the PodConfig key (namespace/name) and applies their
// status if it changed. It returns a delay after which to look again (0: only on events).
func (e *Executor) Sync(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := e.podConfigs.GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	pc := obj.(*berthv1alpha1.PodConfig)
	var mine []berthv1alpha1.PodAttachmentStatus
	for _, en := range pc.Status.Pods {
		if en.Node == e.cfg.NodeName {
			mine = append(mine, en)
		}
	}
	if len(mine) == 0 {
		return 0, nil
	}
	// The agent binds again what the operator bound, and checks every network against its own
	// copy of the policy and the node's own ranges: an object written around the CRD's rules
	// (an older CRD, a direct etcd write), an operator whose policy is wider than the node's,
	// or a range the operator cannot see (the node's own networks) never reaches netlink.
	bound, specErrs := e.bind(pc)
	atts := map[string]*berthv1alpha1.NetworkAttachment{}
	for i := range pc.Spec.NetworkAttachments {
		atts[pc.Spec.NetworkAttachments[i].Name] = &pc.Spec.NetworkAttachments[i]
	}
	deleting := !pc.DeletionTimestamp.IsZero()
	var requeue time.Duration
	changed := false
	out := make([]berthv1alpha1.PodAttachmentStatus, 0, len(mine))
	for _, en := range mine {
		r, again := e.entry(ctx, pc, specErrs, atts[en.Attachment], bound, deleting, en)
		if again {
			requeue = retryAfter
		}
		if r.State != en.State {
			r.LastTransitionTime = &metav1.Time{Time: e.cfg.Now().UTC().Truncate(time.Second)}
			switch r.State {
			case berthv1alpha1.AttachmentConfigured, berthv1alpha1.AttachmentFailed, berthv1alpha1.AttachmentRemoved:
				e.applies.WithLabelValues(string(r.State)).Inc()
			}
		}
		if !sameReport(r, en) {
			changed = true
		}
		out = append(out, r)
	}
	if _, err := e.gcShared(); err != nil {
		klog.FromContext(ctx).Error(err, "Removing unused bridges and VLAN links failed")
	}
	if !changed {
		e.syncs.WithLabelValues("ok").Inc()
		return requeue, nil
	}
	if err := e.cfg.Status.Apply(ctx, pc.Namespace, pc.Name, out); err != nil {
		e.writes.WithLabelValues("error").Inc()
		e.syncs.WithLabelValues("error").Inc()
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("applying the status of %s: %w", key, err)
	}
	e.writes.WithLabelValues("ok").Inc()
	e.syncs.WithLabelValues("ok").Inc()
	return requeue, nil
}

func sameReport(a, b berthv1alpha1.PodAttachmentStatus) bool {
	return a.State == b.State && a.LastError == b.LastError && a.Interface == b.Interface && a.Address == b.Address &&
		a.HostPeer == b.HostPeer && a.Bridge == b.Bridge && a.PodUID == b.PodUID && a.Node == b.Node
}

// entry works out (and makes happen) one entry of this node. The second result asks for a
// retry soon.
func (e *Executor) entry(ctx context.Context, pc *berthv1alpha1.PodConfig, specErrs field.ErrorList,
	att *berthv1alpha1.NetworkAttachment, bound map[string]podconfig.Network, deleting bool, en berthv1alpha1.PodAttachmentStatus) (berthv1alpha1.PodAttachmentStatus, bool) {
	log := klog.FromContext(ctx).WithValues("podConfig", klog.KObj(pc), "pod", en.Pod, "attachment", en.Attachment)
	r := en
	hp := podconfig.HostPeerName(en.PodUID, en.Attachment)
	if en.PodUID == "" {
		return r, false
	}
	if deleting || en.State == berthv1alpha1.AttachmentRemoving || en.State == berthv1alpha1.AttachmentRemoved || att == nil {
		if en.State == berthv1alpha1.AttachmentRemoved {
			return r, false
		}
		if err := e.cfg.Dataplane.Remove(hp); err != nil {
			// The operator's state stays; lastError says why removal is stuck.
			r.LastError = "removing host peer " + hp + ": " + err.Error()
			return r, true
		}
		log.V(2).Info("Attachment removed", "hostPeer", hp)
		r.State, r.LastError, r.HostPeer, r.Interface = berthv1alpha1.AttachmentRemoved, "", hp, en.Attachment
		return r, false
	}
	if en.State == berthv1alpha1.AttachmentPending || (en.State == berthv1alpha1.AttachmentFailed && en.Address == "") {
		return r, false // the operator's: nothing allocated (exhaustion, interface claimed, refusal)
	}
	fail := func(again bool, format string, args ...any) (berthv1alpha1.PodAttachmentStatus, bool) {
		r.State, r.LastError = berthv1alpha1.AttachmentFailed, fmt.Sprintf(format, args...)
		return r, again
	}
	if len(specErrs) > 0 {
		// Whatever was made before the refusal (a grant revoked, a node range that appeared)
		// goes: the refusal means the link must not exist.
		if err := e.cfg.Dataplane.Remove(hp); err != nil {
			return fail(true, "refused by the node agent (%s), and removing host peer %s failed: %v", podconfig.FormatErrors(specErrs.ToAggregate().Errors()), hp, err)
		}
		return fail(false, "refused by the node agent: %s", podconfig.FormatErrors(specErrs.ToAggregate().Errors()))
	}
	network, ok := bound[att.Name]
	if !ok {
		return fail(false, "attachment %s is not bound to a network", att.Name)
	}
	addr, ok := e.lookup(network, en.PodUID, en.Attachment)
	if !ok {
		// Not (yet) in the allocation this agent sees: never act on an address the operator
		// has not recorded.
		return r, false
	}
	pod, err := e.pods.Pods(pc.Namespace).Get(en.Pod)
	if err != nil || string(pod.UID) != en.PodUID || pod.Spec.NodeName != e.cfg.NodeName {
		return r, false // gone or not seen yet: the operator removes the entry of a gone pod
	}
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return r, false // its sandbox, and the links in it, are going
	}
	if pod.Spec.HostNetwork {
		return fail(false, "pod %s uses the host network: attachments are only made in a pod's own network namespace", pod.Name)
	}
	r.Interface, r.HostPeer, r.Bridge, r.Network = att.Name, hp, network.Bridge, network.Name
	r.Address = podconfig.AddressCIDR(addr, network.Prefix)
	sb, err := e.cfg.Resolver.Sandbox(ctx, en.PodUID)
	var rerr *RuntimeError
	switch {
	case errors.Is(err, ErrNoSandbox):
		if pod.Status.Phase == corev1.PodPending && en.State != berthv1alpha1.AttachmentConfigured {
			return en, true // the kubelet is still creating it
		}
		return fail(true, "pod %s (phase %s) has no ready sandbox in the container runtime", pod.Name, pod.Status.Phase)
	case errors.As(err, &rerr):
		if en.State == berthv1alpha1.AttachmentConfigured {
			// Links do not depend on the runtime: keep reporting what was made.
			log.Error(err, "Cannot check the sandbox; keeping the configured attachment")
			return en, true
		}
		return fail(true, "%v", err)
	case err != nil:
		return fail(true, "finding the sandbox of pod %s: %v", pod.Name, err)
	case sb.HostNetwork:
		return fail(false, "pod %s's sandbox uses the node's network namespace", pod.Name)
	}
	a := Attachment{NetNS: sb.NetNS, Interface: att.Name, HostPeer: hp, Bridge: network.Bridge, Gateway: network.Gateway,
		Address: netip.PrefixFrom(addr, network.Prefix.Bits()), Alias: pc.Namespace + "/" + pod.Name + " " + att.Name,
		VLAN: network.VLAN, MTU: network.MTU, Routes: network.Routes}
	start := time.Now()
	err = e.cfg.Dataplane.Apply(a)
	e.applySeconds.Observe(time.Since(start).Seconds())
	var conflict *ConflictError
	var unsupported *UnsupportedError
	switch {
	case err == nil:
		if en.State != berthv1alpha1.AttachmentConfigured {
			log.Info("Attachment configured", "interface", a.Interface, "address", a.Address, "hostPeer", hp, "bridge", a.Bridge, "sandbox", short(sb.ID))
		}
		r.State, r.LastError = berthv1alpha1.AttachmentConfigured, ""
		return r, false
	case vanished(err):
		// The sandbox stopped under us: whatever half of the pair exists goes now, and the
		// next sandbox (if any) is configured on the retry.
		_ = e.cfg.Dataplane.Remove(hp)
		return fail(true, "the pod's network namespace vanished while it was being configured (sandbox %s stopped or replaced): %v", short(sb.ID), err)
	case errors.As(err, &conflict):
		return fail(false, "%s", conflict.Msg)
	case errors.As(err, &unsupported):
		return fail(false, "%s", unsupported.Msg)
	default:
		return fail(true, "%v", err)
	}
}

// lookup finds the address the operator allocated to (podUID, attachment) in the network's
// IPAllocation.
func (e *Executor) lookup(n podconfig.Network, podUID, attachment string) (netip.Addr, bool) {
	obj, ok, _ := e.allocs.GetByKey(n.Name)
	if !ok {
		return netip.Addr{}, false
	}
	al := obj.(*berthv1alpha1.IPAllocation)
	if al.Spec.Master != n.Bridge || al.Spec.CIDR != n.Prefix.String() {
		return netip.Addr{}, false
	}
	for _, a := range al.Spec.Allocations {
		if a.PodUID == podUID && a.Attachment == attachment {
			if ad, err := netip.ParseAddr(a.Address); err == nil && n.Prefix.Contains(ad) {
				return ad, true
			}
		}
	}
	return netip.Addr{}, false
}

// Sweep removes host peers no allocation of this node accounts for (a node that was dead
// while the operator freed its addresses, an agent killed after creating a link whose pod
// then went) and bridges the agent created that nothing uses, and refreshes the gauges.
func (e *Executor) Sweep(ctx context.Context) error {
	log := klog.FromContext(ctx)
	keep := map[string]bool{}
	for _, o := range e.allocs.List() {
		for _, a := range o.(*berthv1alpha1.IPAllocation).Spec.Allocations {
			if a.Node == "" || a.Node == e.cfg.NodeName {
				keep[podconfig.HostPeerName(a.PodUID, a.Attachment)] = true
			}
		}
	}
	peers, err := e.cfg.Dataplane.HostPeers()
	if err != nil {
		return fmt.Errorf("listing host peers: %w", err)
	}
	var errs []error
	for _, p := range peers {
		if keep[p] {
			continue
		}
		if err := e.cfg.Dataplane.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		e.swept.WithLabelValues("peer").Inc()
		log.Info("Removed a host peer no allocation accounts for", "hostPeer", p)
	}
	removed, err := e.gcShared()
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range removed {
		log.Info("Removed an unused link", "link", b)
	}
	return errors.Join(errs...)
}

// bind binds pc as the operator does (podconfig.Bind over this agent's caches) and checks
// every bound network again with the agent's policy and the node's own ranges.
func (e *Executor) bind(pc *berthv1alpha1.PodConfig) (map[string]podconfig.Network, field.ErrorList) {
	var nsLabels map[string]string
	if ns, err := e.namespaces.Get(pc.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	bound, errs := podconfig.Bind(pc, e.network, nsLabels)
	if len(errs) > 0 {
		return nil, errs
	}
	hostRanges, err := e.cfg.Dataplane.HostRanges()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec", "networkAttachments"), fmt.Errorf("listing the node's own ranges: %w", err))}
	}
	reserved := e.cfg.Policy.Reserved(hostRanges)
	for i, a := range pc.Spec.NetworkAttachments {
		for _, err := range e.cfg.Policy.ValidateNetwork(e.network(a.Network), reserved) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "networkAttachments").Index(i).Child("network"), a.Network,
				"PodNetwork "+a.Network+": "+err.Error()))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return bound, nil
}

// network returns the PodNetwork of that name from the cache, or nil.
func (e *Executor) network(name string) *berthv1alpha1.PodNetwork {
	obj, ok, _ := e.networks.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*berthv1alpha1.PodNetwork)
}

// gcShared removes what attachments share on the node once no live entry of this node needs
// it: first the agent's VLAN sub-interfaces (a VLAN link is a bridge port), then the agent's
// bridges that have no port left. It refreshes the per-state gauge.
func (e *Executor) gcShared() ([]string, error) {
	keepBridges, keepVLANs := map[string]bool{}, map[string]bool{}
	states := map[string]float64{}
	for _, o := range e.podConfigs.List() {
		pc := o.(*berthv1alpha1.PodConfig)
		nets := map[string]string{}
		for _, a := range pc.Spec.NetworkAttachments {
			nets[a.Name] = a.Network
		}
		for _, en := range pc.Status.Pods {
			if en.Node != e.cfg.NodeName {
				continue
			}
			states[string(en.State)]++
			if !pc.DeletionTimestamp.IsZero() || en.State == berthv1alpha1.AttachmentRemoving || en.State == berthv1alpha1.AttachmentRemoved {
				continue
			}
			keepBridges[en.Bridge] = true
			if pn := e.network(nets[en.Attachment]); pn != nil && pn.Spec.VLAN != nil {
				keepVLANs[VLANLinkName(pn.Spec.VLAN.Parent, int(pn.Spec.VLAN.ID))] = true
				keepBridges[pn.Spec.Bridge] = true
			}
		}
	}
	e.attachments.Reset()
	for s, n := range states {
		e.attachments.WithLabelValues(s).Set(n)
	}
	vlans, verr := e.cfg.Dataplane.RemoveUnusedVLANs(keepVLANs)
	e.swept.WithLabelValues("vlan").Add(float64(len(vlans)))
	bridges, berr := e.cfg.Dataplane.RemoveUnusedBridges(keepBridges)
	e.swept.WithLabelValues("bridge").Add(float64(len(bridges)))
	return append(vlans, bridges...), errors.Join(verr, berr)
}

// DynamicStatus applies entries to the status subresource with the dynamic client, as field
// manager berth-agent/<node>, forced (the node's entries are the agent's to state).
type DynamicStatus struct {
	Client   dynamic.Interface
	NodeName string
}

// Apply implements StatusApplier.
func (d DynamicStatus) Apply(ctx context.Context, namespace, name string, entries []berthv1alpha1.PodAttachmentStatus) error {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Pod != entries[j].Pod {
			return entries[i].Pod < entries[j].Pod
		}
		return entries[i].Attachment < entries[j].Attachment
	})
	list := make([]any, 0, len(entries))
	for i := range entries {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entries[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": berthv1alpha1.GroupVersion.String(), "kind": "PodConfig",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"status":   map[string]any{"pods": list},
	}}
	_, err := d.Client.Resource(PodConfigGVR).Namespace(namespace).ApplyStatus(ctx, name, u, metav1.ApplyOptions{
		FieldManager: berthv1alpha1.PodConfigAgentFieldManagerPrefix + d.NodeName, Force: true})
	return err
}
