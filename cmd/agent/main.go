// Command agent is Berth's node agent (load part): see pkg/agent/README.md for the flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-sched/berth/pkg/agent"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	klog.InitFlags(fs)
	var cfg agent.Config
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	watchPods := fs.Bool("watch-pods", true, "watch this node's pods to report their UIDs (false: run without a cluster)")
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&cfg.ProcRoot, "proc-root", "/proc", "host /proc directory to sample (a fixture tree in tests)")
	fs.StringVar(&cfg.WatcherURL, "watcher-url", "", "load watcher base URL; reports are POSTed to <url>/watcher")
	fs.StringVar(&cfg.TokenFile, "token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "service account token file, re-read on every push")
	fs.StringVar(&cfg.Listen, "listen", ":9101", "address for /metrics, /healthz and /readyz")
	fs.DurationVar(&cfg.SampleInterval, "sample-interval", time.Second, "how often /proc is sampled")
	fs.DurationVar(&cfg.ReportInterval, "report-interval", 15*time.Second, "how often a report is pushed")
	_ = fs.Parse(os.Args[1:])
	defer klog.Flush()

	if *watchPods {
		cs, err := client(*kubeconfig)
		if err != nil {
			klog.ErrorS(err, "Building the Kubernetes client failed")
			os.Exit(1)
		}
		cfg.Client = cs
	}
	a, err := agent.New(cfg)
	if err != nil {
		klog.ErrorS(err, "Invalid configuration")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		klog.ErrorS(err, "Agent failed")
		os.Exit(1)
	}
}

func client(kubeconfig string) (kubernetes.Interface, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "berth-agent"
	return kubernetes.NewForConfig(rc)
}
