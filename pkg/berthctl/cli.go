// Package berthctl is `kubectl berth nodes` and `kubectl berth status`: Berth's view of every
// node and of its own components, read from the running system (the load watcher's document,
// the agents' NodeImages, the scheduler's Lease, the chart's objects) with the caller's own
// credentials. The plumbing to reach the components is pkg/berthctl/reach, shared with
// `kubectl berth explain`.
package berthctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/pkg/berthctl/reach"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// Options are the flags of nodes and status.
type Options struct {
	Kubeconfig, Context string
	// BerthNamespace is where the chart runs the load watcher, the agents and the operator.
	BerthNamespace string
	// WatcherURL skips the port-forward to the watcher pod.
	WatcherURL string
	// WatcherPortForward reaches the watcher's pod by port-forward instead of the Service proxy.
	WatcherPortForward bool
	WatcherPort        int
	// WatcherReader is the ServiceAccount in BerthNamespace whose short-lived token is shown
	// to the watcher (empty: the one the watcher's Service names; "-": none), for
	// WatcherTokenAudience.
	WatcherReader, WatcherTokenAudience string
	Window                              string
	// SchedulerNamespace and Lease name the scheduler's leader-election Lease; SchedulerPort
	// is its secure port (nodes reads the placed load there).
	SchedulerNamespace, Lease string
	SchedulerPort             int
	Selector, SortBy, Output  string
	Timeout                   time.Duration
}

const nodesUsage = `Usage: kubectl berth nodes [-l SELECTOR] [--sort-by KEY] [-o table|wide|json|yaml] [flags]

Berth's view of every node, read from the running load watcher (through the API server's
service proxy, with your credentials) and the API: measured CPU and memory (window average and latest
sample, percent of the node) against the requests of its pods, the age of the newest sample and
whether it is fresh, stale or missing, the node's instance class and the images its agent
reported (-o wide), and a bar of measured against requested.

Flags:
`

const statusUsage = `Usage: kubectl berth status [-o table|json|yaml] [flags]

Berth's components and versions, the scheduler's leader (its Lease), the load watcher's
freshness summary, the isolation webhook and the berth.dev CRDs, each with what to do when it
is wrong. Exits 1 when a check fails.

Flags:
`

func (o *Options) flags(name, usage string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kubectl berth "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context to use")
	fs.StringVar(&o.BerthNamespace, "berth-namespace", "berth-system", "namespace Berth's chart is installed in (load watcher, agents, operator)")
	fs.StringVar(&o.WatcherURL, "watcher-url", "", "read the load watcher at this address (http://host:port) instead of port-forwarding to its pod")
	fs.BoolVar(&o.WatcherPortForward, "watcher-port-forward", false, "reach the load watcher by a port-forward to its pod (needs create on pods/exec there under the chart's policy) instead of the API server's service proxy")
	fs.StringVar(&o.WatcherReader, "watcher-reader", "", "ServiceAccount in --berth-namespace whose short-lived token is shown to the load watcher (default: the one its Service names in "+ReaderAnnotation+"; - for none); you need create on its serviceaccounts/token (the chart's berthctl-reader Role)")
	fs.StringVar(&o.WatcherTokenAudience, "watcher-token-audience", loadapi.TokenAudience, "audience of that token (the chart's loadWatcher.tokenAudience)")
	fs.IntVar(&o.WatcherPort, "watcher-port", DefaultWatcherPort, "the load watcher's port in its pod (with --watcher-port-forward)")
	fs.StringVar(&o.Window, "window", "", "the watcher's averaging window: 5m, 10m or 15m (default: the watcher's, 15m)")
	fs.StringVarP(&o.Output, "output", "o", "table", "table, wide, json or yaml")
	fs.DurationVar(&o.Timeout, "request-timeout", 30*time.Second, "time limit for the whole command")
	if name == "nodes" {
		fs.StringVarP(&o.Selector, "selector", "l", "", "only nodes matching this label selector")
		fs.StringVar(&o.SortBy, "sort-by", "name", "name, cpu, memory (measured average, highest first), cpu-requests, memory-requests, age (oldest first) or load (missing, stale, fresh)")
		fs.IntVar(&o.SchedulerPort, "scheduler-port", 10259, "the scheduler's secure port in its pod (the placed load is read there, with your credentials)")
	}
	fs.StringVar(&o.SchedulerNamespace, "scheduler-namespace", "", "namespace of the scheduler's Lease (default: berth-system, then kube-system)")
	fs.StringVar(&o.Lease, "lease", "berth-scheduler", "name of the Lease the scheduler elects its leader on")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	return fs
}

// ParseFlags parses a subcommand's args. When it returns false the command ends with code: 0
// after --help, 2 (usage printed) for a bad flag.
func ParseFlags(fs *pflag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, false
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// Main runs `kubectl berth nodes|status ARGS` (args[0] is the verb) and returns the exit code:
// 0, 1 for an error (one sentence on stderr) or a failed status check, 2 for bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o Options
	verb := args[0]
	usage := nodesUsage
	if verb == "status" {
		usage = statusUsage
	}
	fs := o.flags(verb, usage, stderr)
	if code, ok := ParseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: kubectl berth %s takes no arguments, got %q\n", verb, fs.Args())
		return 2
	}
	switch o.Output {
	case "table", "wide", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "error: --output must be table, wide, json or yaml, not %q\n", o.Output)
		return 2
	}
	if verb == "nodes" {
		// why: refuse a bad key before any network work, as usage, not as a run-time failure.
		if err := SortNodes(&NodesView{}, o.SortBy); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var code int
	err := func() error {
		kube, err := reach.Connect(o.Kubeconfig, o.Context)
		if err != nil {
			return err
		}
		dyn, err := dynamic.NewForConfig(kube.Config)
		if err != nil {
			return err
		}
		if verb == "nodes" {
			return o.runNodes(ctx, kube, dyn, stdout)
		}
		failed, err := o.runStatus(ctx, kube, dyn, stdout)
		if failed {
			code = 1
		}
		return err
	}()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return code
}

func (o Options) runNodes(ctx context.Context, kube *reach.Kube, dyn dynamic.Interface, stdout io.Writer) error {
	w, stop, err := o.openWatcher(ctx, kube)
	if err != nil {
		return err
	}
	defer stop()
	doc, err := w.Document(ctx, o.Window)
	if err != nil {
		return err
	}
	view, err := CollectNodes(ctx, kube.Client, dyn, doc, w.Who, o.Selector, time.Now())
	if err != nil {
		return err
	}
	ans, who, err := o.readPlaced(ctx, kube)
	AddPlaced(view, ans, who, err)
	if err := SortNodes(view, o.SortBy); err != nil {
		return err
	}
	return WriteNodes(stdout, view, o.Output)
}

func (o Options) runStatus(ctx context.Context, kube *reach.Kube, dyn dynamic.Interface, stdout io.Writer) (bool, error) {
	in := StatusInput{Client: kube.Client, Dynamic: dyn, BerthNamespace: o.BerthNamespace, Now: time.Now()}
	namespaces := []string{"berth-system", "kube-system"}
	if o.SchedulerNamespace != "" {
		namespaces = []string{o.SchedulerNamespace}
	}
	in.Lease, in.LeaseErr = reach.FindLease(ctx, kube.Client, namespaces, o.Lease)
	if apierrors.IsForbidden(errors.Unwrap(in.LeaseErr)) {
		return false, explainAPIError(errors.Unwrap(in.LeaseErr), "get Lease "+o.Lease)
	}
	w, stop, err := o.openWatcher(ctx, kube)
	if err == nil {
		defer stop()
		in.WatcherFrom = w.Who
		in.Watcher, in.WatcherErr = w.Document(ctx, o.Window)
	} else {
		in.WatcherErr = err
	}
	view, err := CollectStatus(ctx, in)
	if err != nil {
		return false, err
	}
	return view.Failed(), WriteStatus(stdout, view, o.Output)
}

func isNoMatch(err error) bool { return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) }
