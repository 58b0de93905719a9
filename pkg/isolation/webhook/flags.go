package webhook

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/flagvalue"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Flags are the operator's --isolation-* command-line flags.
type Flags struct {
	Enabled                                   bool
	mode, classLabels, pool, taint            string
	schedulerName, isolatedName, exemptNS     string
	spread, marker                            bool
	markerGrace                               time.Duration
	poolBinders                               string
	bind, secret, configuration, certs, hosts string
	maxBody                                   int64
	caValidity, certValidity, sync, shutdown  time.Duration
}

// BindFlags registers the --isolation-* flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	d := Defaults()
	fs.BoolVar(&f.Enabled, "isolation-webhook", false, "serve the instance-isolation mutating webhook (see pkg/isolation/webhook)")
	fs.StringVar(&f.mode, "isolation-mode", string(d.Mode), "what the webhook writes into classed pods: "+strings.Join(Modes, ", "))
	fs.StringVar(&f.classLabels, "isolation-class-labels", strings.Join(d.ClassLabels, ","), "comma-separated pod label keys carrying the instance class")
	fs.StringVar(&f.pool, "isolation-pool-label", d.PoolLabel+"="+d.PoolValue, "node label key=value of the class node pool (required node affinity)")
	fs.StringVar(&f.taint, "isolation-pool-taint", d.TaintKey+"="+d.TaintValue+":"+string(d.TaintEffect), "taint key=value:Effect of the class node pool (tolerated)")
	fs.StringVar(&f.schedulerName, "isolation-scheduler-name", d.SchedulerName, "berth-scheduler's profile (modes berth and both)")
	fs.StringVar(&f.isolatedName, "isolation-isolated-scheduler-name", "", "the isolated profile (InterPodAffinity off) mode both sends pods to when the webhook's terms are their only pod-affinity terms")
	fs.BoolVar(&f.spread, "isolation-spread-replicas", d.SpreadReplicas, "modes ipp and both: keep a controller's classed replicas on different nodes with a required anti-affinity term")
	fs.StringVar(&f.exemptNS, "isolation-exempt-namespaces", strings.Join(d.ExemptNamespaces, ","), "comma-separated namespaces the webhook leaves alone (the chart passes its release namespace and isolation.exemptNamespaces, the same list its namespaceSelector exempts)")
	fs.StringVar(&f.poolBinders, "isolation-pool-binders", "", "comma-separated usernames that may bind pods to pool nodes outside the exempt namespaces: the classes' schedulers "+
		"(the chart passes berth-scheduler's ServiceAccount, and in mode ipp system:kube-scheduler); anyone else's binding to a pool node is refused")
	fs.BoolVar(&f.marker, "isolation-autoscaler-marker", d.AutoscalerMarker, "write the autoscaler-visible marker: classed pods get required node affinity to "+MarkerKey+
		" (their class's value, or no marker yet) and the operator labels each pool node with the class it holds (see pkg/isolation/marker)")
	fs.DurationVar(&f.markerGrace, "isolation-marker-empty-grace", 2*time.Minute, "how long a pool node must hold no classed pod before the operator removes its marker "+
		"(counted from the node's creation, the last classed pod seen there, or the operator's start, whichever is latest)")
	fs.StringVar(&f.bind, "isolation-webhook-bind-address", ":9443", "HTTPS address of the webhook")
	fs.Int64Var(&f.maxBody, "isolation-webhook-max-body-bytes", DefaultMaxBody, "larger AdmissionReview bodies are answered 413")
	fs.StringVar(&f.secret, "isolation-webhook-secret", "", "namespace/name of the Secret holding the serving certificate (required)")
	fs.StringVar(&f.configuration, "isolation-webhook-configuration", "", "MutatingWebhookConfiguration to inject the CA bundle into (operator-managed certificates)")
	fs.StringVar(&f.certs, "isolation-webhook-cert-management", string(CertsByOperator), "operator: generate, rotate and inject the certificates; external: serve what cert-manager writes into the Secret")
	fs.StringVar(&f.hosts, "isolation-webhook-cert-hosts", "", "comma-separated DNS names and IPs of the serving certificate (e.g. <service>.<namespace>.svc)")
	fs.DurationVar(&f.caValidity, "isolation-webhook-ca-validity", 10*365*24*time.Hour, "lifetime of the generated CA (renewed with a third left, the old one trusted until it expires)")
	fs.DurationVar(&f.certValidity, "isolation-webhook-cert-validity", 365*24*time.Hour, "lifetime of the generated serving certificate (renewed with a third left)")
	fs.DurationVar(&f.sync, "isolation-webhook-sync-interval", time.Minute, "how often the Secret is re-read for renewal, reload and CA bundle re-injection")
	fs.DurationVar(&f.shutdown, "isolation-webhook-shutdown-timeout", 10*time.Second, "how long in-flight admission requests may take at shutdown")
	return f
}

// Options turns the flags into Options, naming the flag of each problem.
func (f *Flags) Options() (Options, error) {
	o := Options{BindAddress: f.bind, MaxBody: f.maxBody, WebhookConfiguration: f.configuration,
		CertManagement: CertManagement(f.certs), SyncInterval: f.sync, GracefulShutdown: f.shutdown,
		Certs: CertOptions{CAValidity: f.caValidity, CertValidity: f.certValidity, Hosts: flagvalue.SplitList(f.hosts)}}
	var errs []error
	c := Config{Mode: Mode(f.mode), ClassLabels: flagvalue.SplitList(f.classLabels), SchedulerName: f.schedulerName,
		IsolatedSchedulerName: f.isolatedName, SpreadReplicas: f.spread, ExemptNamespaces: flagvalue.SplitList(f.exemptNS),
		AutoscalerMarker: f.marker}
	c.PoolBinders = flagvalue.SplitList(f.poolBinders)
	var err error
	if c.PoolLabel, c.PoolValue, err = ParseLabelPair(f.pool); err != nil {
		errs = append(errs, fmt.Errorf("--isolation-pool-label: %w", err))
	}
	if c.TaintKey, c.TaintValue, c.TaintEffect, err = ParseTaint(f.taint); err != nil {
		errs = append(errs, fmt.Errorf("--isolation-pool-taint: %w", err))
	}
	if len(errs) == 0 {
		for _, e := range c.Validate() {
			errs = append(errs, fmt.Errorf("--isolation-%s", e.Error()))
		}
	}
	ns, name, ok := strings.Cut(f.secret, "/")
	if !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--isolation-webhook-secret %q: want namespace/name", f.secret))
	}
	if f.markerGrace < 0 {
		errs = append(errs, fmt.Errorf("--isolation-marker-empty-grace %s: must not be negative", f.markerGrace))
	}
	if f.maxBody <= 0 {
		errs = append(errs, fmt.Errorf("--isolation-webhook-max-body-bytes %d: must be positive", f.maxBody))
	}
	o.Config, o.SecretNamespace, o.SecretName = c, ns, name
	return o, errors.Join(errs...)
}

// Marker says whether the operator runs the marker writer (the webhook on and
// --isolation-autoscaler-marker), with the webhook's configuration (pool label and taint, class
// labels, exempt namespaces) and --isolation-marker-empty-grace.
func (f *Flags) Marker() (on bool, c Config, grace time.Duration, err error) {
	if !f.Enabled || !f.marker {
		return false, Config{}, 0, nil
	}
	o, err := f.Options()
	return err == nil, o.Config, f.markerGrace, err
}

// Check validates the flags when the webhook is enabled (nil otherwise).
func (f *Flags) Check() error {
	if !f.Enabled {
		return nil
	}
	_, err := f.Options()
	return err
}

// Setup adds the webhook to the operator's manager when enabled: the HTTPS server and
// certificate loop on every replica, its readyz check and its request counter in the
// manager's /metrics.
func (f *Flags) Setup(mgr manager.Manager, log logr.Logger) error {
	if !f.Enabled {
		return nil
	}
	o, err := f.Options()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := setupNodes(mgr, &o.Config); err != nil {
		return err
	}
	// why: the InstanceClass informer starts with the manager's cache, so the first classed pod
	// does not wait for its initial list; every replica serves, and caches are not leader-only.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &berthv1alpha1.InstanceClass{}, cache.BlockUntilSynced(false)); meta.IsNoMatchError(err) {
		log.Info("InstanceClass CRD not installed: every class belongs to its pods' namespace until it is", "err", err.Error())
	} else if err != nil {
		return fmt.Errorf("InstanceClass informer: %w", err)
	}
	o.Config.Classes = CacheGrants{Reader: mgr.GetCache()}
	reqs := NewRequestsCounter()
	if err := crmetrics.Registry.Register(reqs); err != nil {
		return fmt.Errorf("registering the webhook's metrics: %w", err)
	}
	s, err := New(o, cs, log, &Handler{Requests: reqs})
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("isolation-webhook", s.Ready); err != nil {
		return err
	}
	return mgr.Add(s)
}
