package app

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/apiserver/pkg/server/statusz"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	zpagesfeatures "k8s.io/component-base/zpages/features"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/placedload"

	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
)

// componentName is what upstream calls the scheduler in /statusz, /flagz and informer names.
const componentName = "kube-scheduler"

// newSchedulerCommand is upstream's kube-scheduler command (same flags, same Setup and Run)
// with Berth's own start: Berth serves the secure port itself so that it can add the explain
// endpoint behind the same delegated authentication and authorisation as /metrics. The
// returned run is the command's RunE before Berth's configuration handling wraps it.
func newSchedulerCommand(registryOptions []app.Option) (*cobra.Command, func(*cobra.Command, []string) error) {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: componentName,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates must be set before RunE.
			return opts.ComponentGlobalsRegistry.Set()
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	fs := cmd.Flags()
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	if err := cmd.MarkFlagFilename("config", "yaml", "yml", "json"); err != nil {
		klog.Background().Error(err, "Failed to mark flag filename")
	}
	run := func(c *cobra.Command, _ []string) error { return runScheduler(c, opts, registryOptions) }
	cmd.RunE = run
	return cmd, run
}

func runScheduler(c *cobra.Command, opts *options.Options, registryOptions []app.Option) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		return err
	}
	cliflag.PrintFlags(c.Flags())
	// The DecisionRecord plugin's factory tells rec which profiles record (per-profile args).
	rec := decisionrecord.NewRecorder()
	if opts.InformerName == nil {
		n, err := cache.NewInformerName(componentName)
		if err != nil {
			return err
		}
		opts.InformerName = n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()

	placed := &placedRegistry{}
	cc, sched, err := app.Setup(ctx, opts, wrapRegistry(rec, placed, registryOptions))
	if err != nil {
		return err
	}
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	var profiles []string
	for _, p := range cc.ComponentConfig.Profiles {
		profiles = append(profiles, p.SchedulerName)
	}
	if err := rec.Install(sched, cc.ComponentConfig.Profiles); err != nil {
		return err
	}
	stop := func() {}
	if cc.SecureServing != nil {
		if stop, err = serveSecure(ctx, cc, sched, decisionrecord.Handler(rec, podGetter(cc), profiles), placed); err != nil {
			return err
		}
		// Upstream's Run serves the port when SecureServing is set; Berth already does.
		cc.SecureServing = nil
	}
	defer stop()
	return app.Run(ctx, cc, sched)
}

// wrapRegistry applies the registry options with the DecisionRecord factory bound to this
// scheduler's recorder and every factory wrapped to report its explainers to the recorder and
// its load-aware engine to placed (no package state: each command has its own recorder and
// registry).
func wrapRegistry(rec *decisionrecord.Recorder, placed *placedRegistry, options []app.Option) app.Option {
	return func(r runtime.Registry) error {
		tmp := runtime.Registry{}
		for _, o := range options {
			if err := o(tmp); err != nil {
				return err
			}
		}
		for name, f := range tmp {
			if name == decisionrecord.Name {
				f = decisionrecord.NewFactory(rec)
			}
			// Score plugins that explain their scores report to the recorder; recording profiles
			// ask them for the nodes a record keeps.
			f = rec.ExplainerFactory(f)
			if err := r.Register(name, placed.wrap(name, f)); err != nil {
				return err
			}
		}
		return nil
	}
}

func podGetter(cc *schedulerserverconfig.CompletedConfig) decisionrecord.PodGetter {
	l := cc.InformerFactory.Core().V1().Pods().Lister()
	return func(ns, name string) (*corev1.Pod, error) { return l.Pods(ns).Get(name) }
}

// serveSecure serves upstream's endpoints (/healthz, /livez, /readyz, /metrics,
// /metrics/resources, /configz, SLIs, profiling, flagz, statusz — as upstream's Run would)
// plus decisionapi.Path and placedload.Path, behind the same filter chain upstream uses.
func serveSecure(ctx context.Context, cc *schedulerserverconfig.CompletedConfig, sched *scheduler.Scheduler, explainHandler, placedHandler http.Handler) (func(), error) {
	logger := klog.FromContext(ctx)
	var checks, readyz []healthz.HealthChecker
	if cc.ComponentConfig.LeaderElection.LeaderElect && cc.LeaderElection != nil {
		checks = append(checks, cc.LeaderElection.WatchDog)
		readyz = append(readyz, cc.LeaderElection.WatchDog)
	}
	readyz = append(readyz, healthz.NewShutdownHealthz(ctx.Done()))
	synced := make(chan struct{})
	go func() {
		// Upstream's readiness waits for the event handlers' initial lists too.
		if err := sched.WaitForHandlersSync(ctx); err == nil {
			close(synced)
		}
	}()
	readyz = append(readyz, healthz.NamedCheck("sched-handler-sync", func(*http.Request) error {
		select {
		case <-synced:
			return nil
		default:
			return fmt.Errorf("handlers are not fully synchronized")
		}
	}))

	m := mux.NewPathRecorderMux(componentName)
	healthz.InstallHandler(m, checks...)
	healthz.InstallLivezHandler(m)
	healthz.InstallReadyzHandler(m, readyz...)
	configz.InstallHandler(m)
	m.Handle("/metrics", legacyregistry.HandlerWithReset())
	res := resourcesHandler(cc.InformerFactory.Core().V1().Pods().Lister(), cc.InformerFactory.Core().V1().Nodes().Lister())
	m.HandleFunc("/metrics/resources", func(w http.ResponseWriter, req *http.Request) {
		if isLeader(req.Context(), cc) {
			res.ServeHTTP(w, req)
		}
	})
	slis.SLIMetricsWithReset{}.Install(m)
	if cc.ComponentConfig.EnableProfiling {
		routes.Profiling{}.Install(m)
		if cc.ComponentConfig.EnableContentionProfiling {
			goruntime.SetBlockProfileRate(1)
		}
		routes.DebugFlags{}.Install(m, "v", routes.StringFlagPutHandler(logs.GlogSetter))
	}
	if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentFlagz) && cc.Flagz != nil {
		flagz.Install(m, componentName, cc.Flagz)
	}
	m.Handle(decisionapi.Path, explainHandler)
	m.Handle(placedload.Path, placedHandler)
	if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentStatusz) {
		statusz.Install(m, componentName, statusz.NewRegistry(compatibility.DefaultBuildEffectiveVersion(), statusz.WithListedPaths(m.ListedPaths())))
	}

	h := handlerChain(m, cc.Authentication.Authenticator, cc.Authorization.Authorizer)
	stopCh := make(chan struct{})
	stopped, listenerStopped, err := cc.SecureServing.Serve(h, 5*time.Second, stopCh)
	if err != nil {
		close(stopCh)
		return nil, fmt.Errorf("failed to start secure server: %w", err)
	}
	return func() {
		close(stopCh)
		<-listenerStopped
		<-stopped
		logger.Info("secure server stopped")
	}, nil
}

// handlerChain: authentication, then authorisation (delegated, as configured by the
// --authentication-*/--authorization-* flags), the same filters upstream applies.
func handlerChain(h http.Handler, authn authenticator.Request, authz authorizer.Authorizer) http.Handler {
	ri := &apirequest.RequestInfoFactory{}
	h = genericapifilters.WithAuthorization(h, authz, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, ri)
	h = genericapifilters.WithCacheControl(h)
	h = genericfilters.WithHTTPLogging(h)
	return genericfilters.WithPanicRecovery(h, ri)
}

// isLeader: /metrics/resources is served by the leader only, as upstream does; the Lease
// holder is read per scrape (upstream's Run keeps the elector private).
func isLeader(ctx context.Context, cc *schedulerserverconfig.CompletedConfig) bool {
	if cc.LeaderElection == nil {
		return true
	}
	rec, _, err := cc.LeaderElection.Lock.Get(ctx)
	return err == nil && rec != nil && rec.HolderIdentity == cc.LeaderElection.Lock.Identity()
}
