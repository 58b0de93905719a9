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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

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
	// Nodes lists every node of the cluster: their addresses (status.addresses) are refused
	// as a network's range, gateway, route destination or via, beside the node's own ranges.
	// NewForCluster always sets it; nil (tests of other things) knows no node.
	Nodes corelisters.NodeLister
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
