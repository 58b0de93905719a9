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
	"github.com/berth-sched/berth/pkg/agent/images"
	"github.com/berth-sched/berth/pkg/agent/podnet"
	"github.com/berth-sched/berth/pkg/podconfig"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() { os.Exit(run()) }

// run is the agent; its exit code goes to main, so every deferred cleanup (the image
// publisher, the PodConfig executor's handles, klog's buffer) runs before the process exits.
func run() int {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	klog.InitFlags(fs)
	var cfg agent.Config
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	watchPods := fs.Bool("watch-pods", true, "watch this node's pods to report their UIDs (false: run without a cluster)")
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&cfg.ProcRoot, "proc-root", "/proc", "host /proc directory to sample (a fixture tree in tests)")
	fs.StringVar(&cfg.CgroupRoot, "cgroup-root", "", "host cgroup hierarchy (e.g. the host's /sys/fs/cgroup mounted in) to read each pod's CPU and memory from, v1 or v2; empty = no per-pod usage in reports")
	fs.StringVar(&cfg.WatcherURL, "watcher-url", "", "load watcher base URL; reports are POSTed to <url>/watcher")
	fs.StringVar(&cfg.TokenFile, "token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "service account token file, re-read on every push")
	fs.StringVar(&cfg.Listen, "listen", ":9101", "address for /metrics, /healthz and /readyz")
	fs.DurationVar(&cfg.SampleInterval, "sample-interval", time.Second, "how often /proc is sampled")
	fs.DurationVar(&cfg.ReportInterval, "report-interval", 15*time.Second, "how often a report is pushed")
	// Image inventory (pkg/agent/images): NodeImages for the NodeImageLocality plugin.
	criSocket := fs.String("cri-socket", "", "CRI runtime socket (path or unix:// URL) whose images are published as this node's NodeImages; empty disables the image inventory")
	var imgCfg images.Config
	fs.DurationVar(&imgCfg.Interval, "image-interval", images.DefaultInterval, "how often the runtime's images are listed (the change detection: the CRI has no image events)")
	fs.DurationVar(&imgCfg.Heartbeat, "image-heartbeat", images.DefaultHeartbeat, "NodeImages status.observedTime is refreshed at least this often while nothing changes")
	fs.IntVar(&imgCfg.MaxImages, "max-images", images.DefaultMaxImages, "a node listing more images is not published (Ready=False, the previous inventory kept)")
	// PodConfig executor (pkg/agent/podnet): links in this node's pods selected by PodConfigs.
	podConfig := fs.Bool("podconfig", false, "run the PodConfig executor: make the network attachments the operator allocated in this node's pods (needs --cri-socket, the node's network namespace, NET_ADMIN and SYS_ADMIN)")
	podConfigResync := fs.Duration("podconfig-resync", podnet.DefaultResync, "how often every attachment of this node is re-checked and stale links are swept")
	podConfigPolicy := podconfig.BindPolicyFlags(fs)
	_ = fs.Parse(os.Args[1:])
	defer klog.Flush()
	if *podConfig && *criSocket == "" {
		klog.ErrorS(nil, "--podconfig needs --cri-socket (the sandboxes' network namespaces are found through the CRI)")
		return 2
	}
	policy, err := podConfigPolicy()
	if *podConfig && err != nil {
		klog.ErrorS(err, "Invalid PodConfig policy")
		return 2
	}

	var rc *rest.Config
	if *watchPods || *criSocket != "" || *podConfig {
		var err error
		if rc, err = restConfig(*kubeconfig); err != nil {
			klog.ErrorS(err, "Building the Kubernetes client failed")
			return 1
		}
	}
	if *watchPods {
		cfg.Client = kubernetes.NewForConfigOrDie(rc)
	}
	a, err := agent.New(cfg)
	if err != nil {
		klog.ErrorS(err, "Invalid configuration")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var imagesReady func() error
	if *criSocket != "" {
		// CRI failures show on the NodeImages object, events and metrics, and on /readyz (a
		// wrong socket must fail the DaemonSet's rollout); never on /healthz, and the load
		// reports go on regardless.
		imgCfg.NodeName = cfg.NodeName
		imgCfg.Registerer = a.Registry()
		lister := images.NewCRILister(*criSocket, 10*time.Second)
		imgCfg.Lister = lister
		pub, stopEvents, err := images.NewForCluster(imgCfg, kubernetes.NewForConfigOrDie(rc), dynamic.NewForConfigOrDie(rc))
		if err != nil {
			klog.ErrorS(err, "Invalid image inventory configuration")
			return 2
		}
		imagesReady = pub.Ready
		done := make(chan struct{})
		go func() { defer close(done); pub.Run(ctx) }()
		defer func() { <-done; lister.Close(context.Background()); stopEvents() }()
	}
	if *podConfig {
		stopPodNet, err := runPodNet(ctx, cfg.NodeName, *criSocket, cfg.ProcRoot, *podConfigResync, policy, a, rc)
		if err != nil {
			klog.ErrorS(err, "PodConfig executor cannot start")
			return 2
		}
		defer stopPodNet()
	}
	if imagesReady != nil {
		// After the PodConfig executor's check: when both fail on one socket, /readyz names
		// the executor's, the more specific.
		a.AddReadyCheck("images", imagesReady)
	}
	if err := a.Run(ctx); err != nil {
		klog.ErrorS(err, "Agent failed")
		return 1
	}
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
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
	return rc, nil
}
