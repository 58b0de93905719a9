package operator

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/berth-sched/berth/pkg/grants"
	"github.com/berth-sched/berth/pkg/podconfig"
	podconfigcontroller "github.com/berth-sched/berth/pkg/podconfig/controller"
)

// Options configure the operator's manager.
type Options struct {
	// MetricsAddr serves /metrics ("0" disables it).
	MetricsAddr string
	// MetricsInsecure serves /metrics as plain HTTP to anyone (local debugging only). By
	// default /metrics is HTTPS (a self-signed certificate) and every request needs a bearer
	// token the API server accepts (TokenReview) for a user allowed to get the non-resource
	// URL /metrics (SubjectAccessReview), like the scheduler's own /metrics. Inverted so the
	// zero value is the secure one.
	MetricsInsecure bool
	// HealthAddr serves /healthz and /readyz.
	HealthAddr string
	// LeaderElection on a Lease named LeaderElectionID in LeaderElectionNamespace (required
	// outside a cluster; in a pod it defaults to the pod's namespace).
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// GracefulShutdown bounds how long runnables get to stop after the context ends.
	GracefulShutdown time.Duration
	// PodConfig runs the PodConfig controller (IPAM for runtime network attachments; see
	// pkg/podconfig). Off by default: it caches every pod of the cluster (trimmed) and needs the
	// PodConfig and IPAllocation CRDs and their RBAC (chart value podConfig.enabled).
	PodConfig               bool
	PodConfigPolicy         podconfig.Policy
	PodConfigRemovalTimeout time.Duration
	// Grants runs the Grants controller (each granted namespace's read-only view of its
	// PodNetworks and InstanceClasses, and InstanceClass status; see pkg/grants). Off by
	// default: it needs the Grants and InstanceClass CRDs and their RBAC (chart value
	// grants.enabled).
	Grants bool
	// TrimCache caches Pods and Nodes trimmed to what the cache's readers use (the PodConfig
	// controller's transform) even without PodConfig: the isolation marker's writer watches every
	// pod of the cluster and reads only labels, owners, node, phase and deletion. The operator's
	// other pod readers use the API server directly (APIReader).
	TrimCache bool
}

// NewManager builds a manager running the SecondaryScheduler controller.
func NewManager(cfg *rest.Config, o Options) (manager.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "berth-operator"
	}
	grace := o.GracefulShutdown
	if grace == 0 {
		grace = 30 * time.Second
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.HealthAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &grace,
		Cache:                         podconfigcontroller.CacheOptions(o.PodConfig || o.TrimCache),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if o.PodConfig {
		if err := podconfigcontroller.Setup(mgr, o.PodConfigPolicy, o.PodConfigRemovalTimeout); err != nil {
			return nil, fmt.Errorf("setting up the PodConfig controller: %w", err)
		}
	}
	if o.Grants {
		if err := grants.Setup(mgr, grants.Options{Networks: o.PodConfig}); err != nil {
			return nil, fmt.Errorf("setting up the Grants controller: %w", err)
		}
	}
	r := &Reconciler{Client: mgr.GetClient(), Scheme: scheme, APIReader: mgr.GetAPIReader()}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informer caches have synced: before that the operator would act on
	// an empty view of the cluster.
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// metricsOptions serves /metrics over HTTPS behind the API server's authentication and
// authorization unless o.MetricsInsecure. The filter authenticates bearer tokens only (client
// certificates are not checked), so scrapers present a ServiceAccount token.
func metricsOptions(o Options) metricsserver.Options {
	if o.MetricsInsecure {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}
