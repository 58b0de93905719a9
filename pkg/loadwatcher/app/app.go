// Package app wires the load watcher: flags, the chosen source, node and agent-pod informers,
// and the HTTP server. cmd/loadwatcher only parses flags and calls Run.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/berth-sched/berth/pkg/flagvalue"
	"github.com/berth-sched/berth/pkg/loadwatcher"
	"github.com/berth-sched/berth/pkg/loadwatcher/source"
)

// Options are the load watcher's settings (one per flag).
type Options struct {
	Source, Listen, Kubeconfig, PromURL     string
	StaleAfter, PollInterval, TokenCacheTTL time.Duration
	ServiceAccounts, Audiences              string
	MaxPodUIDs                              int
	// AnonymousReads serves GET /watcher to callers without a token: only for upstream
	// clients that cannot send one (see pkg/loadwatcher/README.md for what they learn).
	AnonymousReads bool
	// APIQPS and APIBurst bound the watcher's API client. Every agent's token is reviewed
	// once per token-cache-ttl, so a 5000-node cluster needs ~83 TokenReviews/s at the 1m
	// default: client-go's 5 QPS would queue reports for minutes after a restart.
	APIQPS                          float64
	APIBurst                        int
	PromCPU, PromMem, PromNodeLabel string
	PromScale                       float64
}

// AddFlags binds o to the command's flags, with their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Source, "source", "agent", "load source: agent, prometheus or metrics-server")
	fs.StringVar(&o.Listen, "listen", ":2020", "address for /watcher, /healthz, /readyz and /metrics")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	fs.StringVar(&o.PromURL, "prometheus-url", "", "Prometheus base URL (source prometheus)")
	fs.StringVar(&o.PromCPU, "prometheus-cpu-metric", source.DefaultCPUMetric, "PromQL series of node CPU utilisation")
	fs.StringVar(&o.PromMem, "prometheus-memory-metric", source.DefaultMemoryMetric, "PromQL series of node memory utilisation")
	fs.StringVar(&o.PromNodeLabel, "prometheus-node-label", source.DefaultNodeLabel, "label holding the node name")
	fs.Float64Var(&o.PromScale, "prometheus-scale", 1, "factor turning the series into percent (100 for ratios)")
	fs.DurationVar(&o.StaleAfter, "stale-after", 5*time.Minute, "a node whose newest sample is older is reported stale")
	fs.DurationVar(&o.PollInterval, "poll-interval", 30*time.Second, "how often the prometheus and metrics-server sources are polled")
	fs.StringVar(&o.ServiceAccounts, "agent-service-account", "berth-system/berth-agent", "comma-separated namespace/name service accounts allowed to report (source agent)")
	fs.StringVar(&o.Audiences, "token-audience", "", "comma-separated audiences for TokenReview (empty: the API server's)")
	fs.BoolVar(&o.AnonymousReads, "anonymous-reads", false, "serve GET /watcher without a token (upstream clients that cannot send one); by default a reader needs a token allowed to get nodeloads.berth.dev (and nodeloads/pods for pod lists)")
	fs.DurationVar(&o.TokenCacheTTL, "token-cache-ttl", time.Minute, "how long a successful TokenReview is reused (0 disables)")
	fs.IntVar(&o.MaxPodUIDs, "max-pod-uids", loadwatcher.DefaultMaxPodUIDs, "largest pod list a report may carry")
	fs.Float64Var(&o.APIQPS, "kube-api-qps", 100, "queries per second to the API server (TokenReviews of agents' tokens, informers)")
	fs.IntVar(&o.APIBurst, "kube-api-burst", 200, "burst of queries to the API server above --kube-api-qps")
}

// Validate checks the options that need no cluster, so a bad flag fails before connecting.
func (o *Options) Validate() error {
	switch o.Source {
	case "agent", "metrics-server":
	case "prometheus":
		if o.PromURL == "" {
			return errors.New("--prometheus-url is required with --source=prometheus")
		}
	default:
		return fmt.Errorf("--source=%q: want agent, prometheus or metrics-server", o.Source)
	}
	if o.Source == "agent" && len(flagvalue.SplitList(o.ServiceAccounts)) == 0 {
		return errors.New("--agent-service-account: at least one namespace/name is required with --source=agent")
	}
	for _, sa := range flagvalue.SplitList(o.ServiceAccounts) {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" {
			return fmt.Errorf("--agent-service-account: %q is not namespace/name", sa)
		}
	}
	if o.StaleAfter <= 0 {
		return fmt.Errorf("--stale-after=%s: must be positive", o.StaleAfter)
	}
	if o.APIQPS <= 0 {
		return fmt.Errorf("--kube-api-qps=%g: must be positive", o.APIQPS)
	}
	if o.APIBurst < 1 {
		return fmt.Errorf("--kube-api-burst=%d: must be at least 1", o.APIBurst)
	}
	if o.Source != "agent" && o.PollInterval <= 0 {
		return fmt.Errorf("--poll-interval=%s: must be positive", o.PollInterval)
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

// Run serves until ctx ends, then shuts the HTTP server down gracefully.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	rc, err := restConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "berth-loadwatcher"
	rc.QPS, rc.Burst = float32(o.APIQPS), o.APIBurst
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	storeSource, err := storeSourceOf(o.Source)
	if err != nil {
		return err
	}
	store := loadwatcher.NewStore(storeSource, o.StaleAfter)
	srv := loadwatcher.NewServer(store)
	srv.Limits = loadwatcher.Limits{MaxPodUIDs: o.MaxPodUIDs, MaxAge: o.StaleAfter}

	// One reviewer for reports and reads: a token is reviewed once per TTL whichever it sends.
	reviewer := loadwatcher.NewTokenReviewer(cs, flagvalue.SplitList(o.Audiences), o.TokenCacheTTL)
	srv.Reads = loadwatcher.NewReadAuthorizer(cs, reviewer)
	srv.Reads.Anonymous = o.AnonymousReads
	if o.AnonymousReads {
		klog.InfoS("Serving GET /watcher without authentication (--anonymous-reads): any client that reaches the watcher learns every node's load and which pods run where")
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	nodeLister, nodeSynced := watchNodes(factory, store, srv)
	synced, firstPoll, err := startSource(ctx, o, rc, cs, srv, reviewer, nodeLister, []cache.InformerSynced{nodeSynced})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	srv.Ready = readiness(synced, firstPoll)
	return serve(ctx, o, srv.Handler())
}

func storeSourceOf(src string) (string, error) {
	switch src {
	case "agent":
		return loadwatcher.SourceAgent, nil
	case "prometheus":
		return loadwatcher.SourcePrometheus, nil
	case "metrics-server":
		return loadwatcher.SourceMetricsServer, nil
	}
	return "", fmt.Errorf("--source=%q: want agent, prometheus or metrics-server", src)
}

// watchNodes keeps store's node list: every source needs it, since unknown nodes are refused,
// known nodes without data are listed as missing and deleted nodes are forgotten.
func watchNodes(factory informers.SharedInformerFactory, store *loadwatcher.Store, srv *loadwatcher.Server) (corelisters.NodeLister, cache.InformerSynced) {
	nodeInf := factory.Core().V1().Nodes()
	nodeLister := nodeInf.Lister()
	reg, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				store.SetKnown(n.Name, true)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				store.SetKnown(n.Name, false)
			}
		},
	})
	srv.NodeExists = func(name string) bool {
		_, err := nodeLister.Get(name)
		return err == nil
	}
	if err != nil {
		// Only a stopped informer refuses a handler; readiness then never comes.
		return nodeLister, func() bool { return false }
	}
	// Ready once the handler has marked the initial nodes known in the store, not only once
	// the informer's own store holds them: the store answers /watcher from its known set.
	return nodeLister, reg.HasSynced
}

// startSource wires the chosen source into srv: the agents' authenticator, or a poller. It
// returns what readiness waits for: the informers (synced grown by the agent pods') and, for a
// poller, a channel closed after its first poll.
func startSource(ctx context.Context, o Options, rc *rest.Config, cs kubernetes.Interface, srv *loadwatcher.Server,
	reviewer *loadwatcher.TokenReviewer, nodeLister corelisters.NodeLister, synced []cache.InformerSynced) ([]cache.InformerSynced, chan struct{}, error) {
	var poller loadwatcher.Poller
	switch o.Source {
	case "agent":
		sas := flagvalue.SplitList(o.ServiceAccounts)
		getPod, podSynced := agentPods(ctx, cs, sas)
		synced = append(synced, podSynced...)
		auth, err := loadwatcher.NewAuthenticatorWith(reviewer, sas, getPod)
		if err != nil {
			return nil, nil, err
		}
		srv.Auth = auth
		return synced, nil, nil
	case "prometheus":
		p, err := source.NewPrometheus(o.PromURL)
		if err != nil {
			return nil, nil, err
		}
		p.CPUMetric, p.MemoryMetric, p.NodeLabel, p.Scale = o.PromCPU, o.PromMem, o.PromNodeLabel, o.PromScale
		// Served under the series' own names, as before the store kept typed numbers.
		srv.Store.SetMetricNames(p.CPUMetric, p.MemoryMetric)
		poller = p
	case "metrics-server":
		mc, err := metricsclient.NewForConfig(rc)
		if err != nil {
			return nil, nil, err
		}
		poller = &source.MetricsServer{Client: mc, Capacity: func(node string) (int64, int64, bool) {
			n, err := nodeLister.Get(node)
			if err != nil {
				return 0, 0, false
			}
			return n.Status.Capacity.Cpu().MilliValue(), n.Status.Capacity.Memory().Value(), true
		}}
	}
	firstPoll := make(chan struct{})
	go func() {
		cache.WaitForCacheSync(ctx.Done(), synced...)
		srv.RunPoller(ctx, poller, o.PollInterval, firstPoll)
	}()
	return synced, firstPoll, nil
}

// readiness is ready once every informer has synced and, with a poller, its first poll is done.
func readiness(synced []cache.InformerSynced, firstPoll chan struct{}) func() bool {
	return func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		if firstPoll != nil {
			select {
			case <-firstPoll:
			default:
				return false
			}
		}
		return true
	}
}

// serve runs the HTTP server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, o Options, h http.Handler) error {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	klog.InfoS("Load watcher serving", "listen", ln.Addr().String(), "source", o.Source, "staleAfter", o.StaleAfter)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	klog.InfoS("Load watcher shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// agentPods watches the pods of each allowed agent service account (field selector on
// spec.serviceAccountName, so the watcher holds a DaemonSet's pods, not the cluster's) for the
// identity check when tokens carry no node name.
func agentPods(ctx context.Context, cs kubernetes.Interface, sas []string) (loadwatcher.PodGetter, []cache.InformerSynced) {
	listers := map[string]corelisters.PodNamespaceLister{}
	var synced []cache.InformerSynced
	for _, sa := range sas {
		ns, name, _ := strings.Cut(sa, "/")
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.FieldSelector = fields.OneTermEqualSelector("spec.serviceAccountName", name).String()
			}))
		inf := f.Core().V1().Pods()
		l := inf.Lister().Pods(ns)
		synced = append(synced, inf.Informer().HasSynced)
		f.Start(ctx.Done())
		listers[sa] = l
	}
	return func(_ context.Context, ns, name string) (*corev1.Pod, error) {
		for sa, l := range listers {
			if !strings.HasPrefix(sa, ns+"/") {
				continue
			}
			if p, err := l.Get(name); err == nil {
				return p, nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}, synced
}
