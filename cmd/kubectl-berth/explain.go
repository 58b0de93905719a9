package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/pkg/berthctl"
	"github.com/berth-sched/berth/pkg/berthctl/reach"
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// Defaults of `kubectl berth explain`.
const (
	// DefaultLease is the Lease berth-scheduler elects its leader on (its profile name).
	DefaultLease = "berth-scheduler"
	// DefaultPort is the scheduler's secure port.
	DefaultPort = 10259
)

// DefaultLeaseNamespaces are searched in order when --scheduler-namespace is not given: the
// chart's namespace, then where a standalone berth-scheduler elects.
var DefaultLeaseNamespaces = []string{"berth-system", "kube-system"}

// CLIOptions are `kubectl berth explain pod NAME`'s flags.
type CLIOptions struct {
	Kubeconfig, Context, Namespace string
	// SchedulerNamespace and Lease name the Lease whose holder is the leader scheduler.
	SchedulerNamespace, Lease string
	// SchedulerURL skips the Lease and port-forward: https://host:port of a scheduler the
	// caller can reach (e.g. one running outside the cluster).
	SchedulerURL string
	Port         int
	// CAFile verifies the scheduler's serving certificate; InsecureSkipVerify does not. With
	// port-forward (the default) the tunnel goes through the API server to the leader pod, and
	// berth-scheduler serves a self-signed certificate unless given one, so verification is
	// skipped there unless CAFile is set.
	CAFile             string
	InsecureSkipVerify bool
	Output             string
	Timeout            time.Duration
}

const usage = `Usage: kubectl berth explain pod NAME [-n NAMESPACE] [flags]

Prints why berth-scheduler placed the pod where it did (or why it could not): per node the
Filter verdict, every Score plugin's score, the total and the chosen node, read from the leader
scheduler's decision record (/debug/berth/explain on its secure port, with your credentials;
you need get on that non-resource URL).

Flags:
`

// explainMain runs `kubectl berth ARGS` and returns the exit code.
func explainMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprintln(stderr, "Usage: kubectl berth explain pod NAME [-n NAMESPACE] [flags]")
		return 2
	}
	var o CLIOptions
	fs := pflag.NewFlagSet("kubectl berth explain", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context to use")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the pod (default: the context's)")
	fs.StringVar(&o.SchedulerNamespace, "scheduler-namespace", "", "namespace of the scheduler's Lease and pods (default: berth-system, then kube-system)")
	fs.StringVar(&o.Lease, "lease", DefaultLease, "name of the Lease the scheduler elects its leader on")
	fs.StringVar(&o.SchedulerURL, "scheduler-url", "", "read from this scheduler (https://host:port) instead of port-forwarding to the Lease holder")
	fs.IntVar(&o.Port, "port", DefaultPort, "the scheduler's secure port in its pod")
	fs.StringVar(&o.CAFile, "scheduler-ca", "", "CA bundle that signed the scheduler's serving certificate")
	fs.BoolVar(&o.InsecureSkipVerify, "insecure-skip-tls-verify", false, "do not verify the scheduler's serving certificate (implied for port-forward without --scheduler-ca)")
	fs.StringVarP(&o.Output, "output", "o", "table", "table or json")
	fs.DurationVar(&o.Timeout, "request-timeout", 30*time.Second, "time limit for the whole lookup")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if code, ok := berthctl.ParseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	pos := fs.Args()
	var name string
	switch {
	case len(pos) == 2 && (pos[0] == "pod" || pos[0] == "pods" || pos[0] == "po"):
		name = pos[1]
	case len(pos) == 1 && strings.HasPrefix(pos[0], "pod/"):
		name = strings.TrimPrefix(pos[0], "pod/")
	default:
		fs.Usage()
		return 2
	}
	if o.Output != "table" && o.Output != "json" {
		fmt.Fprintf(stderr, "error: --output must be table or json, not %q\n", o.Output)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rec, raw, err := Explain(ctx, o, name, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	if o.Output == "json" {
		_, _ = stdout.Write(raw)
		return 0
	}
	if err := writeTable(stdout, rec); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// NoRecordError is the scheduler's answer when it holds no record of the pod.
type NoRecordError struct {
	decisionapi.NotFound
	Scheduler string
}

func (e *NoRecordError) Error() string {
	return fmt.Sprintf("%s has no decision record (%s): %s", e.Scheduler, e.Reason, e.NotFound.Error)
}

// Explain finds the scheduler (the Lease holder's pod through port-forward, or
// o.SchedulerURL) and reads the pod's record; raw is the JSON as served. Progress notes go to
// info.
func Explain(ctx context.Context, o CLIOptions, name string, info io.Writer) (decisionapi.Record, []byte, error) {
	var rec decisionapi.Record
	kube, err := reach.Connect(o.Kubeconfig, o.Context)
	if err != nil {
		return rec, nil, err
	}
	cfg, client := kube.Config, kube.Client
	ns := o.Namespace
	if ns == "" {
		ns = kube.Namespace
	}
	// The pod's UID makes the scheduler refuse a record of an earlier pod with the same name.
	var uid string
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		uid = string(pod.UID)
	case apierrors.IsNotFound(err):
		fmt.Fprintf(info, "pod %s/%s does not exist; asking the scheduler anyway (it may remember a deleted pod)\n", ns, name)
	case apierrors.IsForbidden(err):
		// why: reading explanations is granted on the scheduler (the chart's explain-reader
		// roles), not on every namespace's pods; the UID only guards against an earlier pod of
		// the same name, so go on without it and say so.
		fmt.Fprintf(info, "you may not read pod %s/%s; asking the scheduler without its UID (a record of an earlier pod with this name would not be told apart)\n", ns, name)
	default:
		return rec, nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	// Why the pod was moved, if Berth's rebalancer moved it (its Events outlive the pod).
	writeMoves(ctx, client, ns, name, info)

	base, who, hc, stop, err := o.Scheduler().Open(ctx, cfg, client)
	if err != nil {
		return rec, nil, err
	}
	defer stop()
	q := url.Values{"namespace": {ns}, "name": {name}}
	if uid != "" {
		q.Set("uid", uid)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+decisionapi.Path+"?"+q.Encode(), nil)
	if err != nil {
		return rec, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return rec, nil, fmt.Errorf("reading %s from %s: %w", decisionapi.Path, who, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return rec, nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(body, &rec); err != nil {
			return rec, nil, fmt.Errorf("%s answered something that is not a record: %w", who, err)
		}
		return rec, body, nil
	case http.StatusNotFound, http.StatusBadRequest:
		var nf decisionapi.NotFound
		if json.Unmarshal(body, &nf) == nil && nf.Reason != "" {
			return rec, nil, &NoRecordError{NotFound: nf, Scheduler: who}
		}
	case http.StatusUnauthorized, http.StatusForbidden:
		return rec, nil, fmt.Errorf("%s refused the request (%d): your credentials need get on the non-resource URL %s (e.g. a ClusterRole with nonResourceURLs: [%q]); answer: %s",
			who, resp.StatusCode, decisionapi.Path, decisionapi.Path, strings.TrimSpace(string(body)))
	}
	return rec, nil, fmt.Errorf("%s answered %d: %s", who, resp.StatusCode, strings.TrimSpace(string(body)))
}

// Scheduler is how the options reach the leader scheduler (reach.Scheduler).
func (o CLIOptions) Scheduler() reach.Scheduler {
	namespaces := DefaultLeaseNamespaces
	if o.SchedulerNamespace != "" {
		namespaces = []string{o.SchedulerNamespace}
	}
	return reach.Scheduler{URL: o.SchedulerURL, Namespaces: namespaces, Lease: o.Lease, Port: o.Port,
		CAFile: o.CAFile, Insecure: o.InsecureSkipVerify, Timeout: o.Timeout,
		ExpiredNote: "and records live only in the running leader's memory"}
}
