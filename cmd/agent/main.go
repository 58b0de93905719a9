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

func main() {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	klog.InitFlags(fs)
	f := bindFlags(fs)
	_ = fs.Parse(os.Args[1:])
	os.Exit(run(f))
}

// flags is the agent's command line.
type flags struct {
	cfg        agent.Config
	kubeconfig string
	watchPods  bool
	// Image inventory (pkg/agent/images): NodeImages for the NodeImageLocality plugin.
	criSocket string
	img       images.Config
	// PodConfig executor (pkg/agent/podnet): links in this node's pods selected by PodConfigs.
	podConfig       bool
	podConfigResync time.Duration
	podConfigPolicy func() (podconfig.Policy, error)
}

// bindFlags registers the agent's flags on fs.
func bindFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	cfg := &f.cfg
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	fs.BoolVar(&f.watchPods, "watch-pods", true, "watch this node's pods to report their UIDs (false: run without a cluster)")
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&cfg.ProcRoot, "proc-root", "/proc", "host /proc directory to sample (a fixture tree in tests)")
	fs.StringVar(&cfg.CgroupRoot, "cgroup-root", "", "host cgroup hierarchy (e.g. the host's /sys/fs/cgroup mounted in) to read each pod's CPU and memory from, v1 or v2; empty = no per-pod usage in reports")
	fs.StringVar(&cfg.WatcherURL, "watcher-url", "", "load watcher base URL; reports are POSTed to <url>/watcher")
	fs.StringVar(&cfg.TokenFile, "token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "service account token file, re-read on every push")
	fs.StringVar(&cfg.Listen, "listen", ":9101", "address for /metrics, /healthz and /readyz")
	fs.DurationVar(&cfg.SampleInterval, "sample-interval", time.Second, "how often /proc is sampled")
	fs.DurationVar(&cfg.ReportInterval, "report-interval", 15*time.Second, "how often a report is pushed")
	fs.StringVar(&f.criSocket, "cri-socket", "", "CRI runtime socket (path or unix:// URL) whose images are published as this node's NodeImages; empty disables the image inventory")
	fs.DurationVar(&f.img.Interval, "image-interval", images.DefaultInterval, "how often the runtime's images are listed (the change detection: the CRI has no image events)")
	fs.DurationVar(&f.img.Heartbeat, "image-heartbeat", images.DefaultHeartbeat, "NodeImages status.observedTime is refreshed at least this often while nothing changes")
	fs.IntVar(&f.img.MaxImages, "max-images", images.DefaultMaxImages, "a node listing more images is not published (Ready=False, the previous inventory kept)")
	fs.BoolVar(&f.podConfig, "podconfig", false, "run the PodConfig executor: make the network attachments the operator allocated in this node's pods (needs --cri-socket, the node's network namespace, NET_ADMIN and SYS_ADMIN)")
	fs.DurationVar(&f.podConfigResync, "podconfig-resync", podnet.DefaultResync, "how often every attachment of this node is re-checked and stale links are swept")
	f.podConfigPolicy = podconfig.BindPolicyFlags(fs)
	return f
}

// run is the agent; its exit code goes to main, so every deferred cleanup (the image
// publisher, the PodConfig executor's handles, klog's buffer) runs before the process exits.
// Bad flags exit 2, a failure 1.
func run(f *flags) int {
	defer klog.Flush()
	if f.podConfig && f.criSocket == "" {
		klog.ErrorS(nil, "--podconfig needs --cri-socket (the sandboxes' network namespaces are found through the CRI)")
		return 2
	}
	policy, err := f.podConfigPolicy()
	if f.podConfig && err != nil {
		klog.ErrorS(err, "Invalid PodConfig policy")
		return 2
	}
	var rc *rest.Config
	if f.watchPods || f.criSocket != "" || f.podConfig {
		if rc, err = restConfig(f.kubeconfig); err != nil {
			klog.ErrorS(err, "Building the Kubernetes client failed")
			return 1
		}
	}
	if f.watchPods {
		f.cfg.Client = kubernetes.NewForConfigOrDie(rc)
	}
	a, err := agent.New(f.cfg)
	if err != nil {
		klog.ErrorS(err, "Invalid configuration")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var imagesReady func() error
	if f.criSocket != "" {
		ready, stopImages, err := startImages(ctx, f, a, rc)
		if err != nil {
			klog.ErrorS(err, "Invalid image inventory configuration")
			return 2
		}
		imagesReady = ready
		defer stopImages()
	}
	if f.podConfig {
		stopPodNet, err := runPodNet(ctx, f.cfg.NodeName, f.criSocket, f.cfg.ProcRoot, f.podConfigResync, policy, a, rc)
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

// startImages runs the image inventory's publisher until ctx ends. CRI failures show on the
// NodeImages object, events and metrics, and on /readyz (ready: a wrong socket must fail the
// DaemonSet's rollout); never on /healthz, and the load reports go on regardless. stop waits
// for the publisher to end, then closes the CRI connection and the event broadcaster.
func startImages(ctx context.Context, f *flags, a *agent.Agent, rc *rest.Config) (ready func() error, stop func(), err error) {
	imgCfg := f.img
	imgCfg.NodeName = f.cfg.NodeName
	imgCfg.Registerer = a.Registry()
	lister := images.NewCRILister(f.criSocket, 10*time.Second)
	imgCfg.Lister = lister
	pub, stopEvents, err := images.NewForCluster(imgCfg, kubernetes.NewForConfigOrDie(rc), dynamic.NewForConfigOrDie(rc))
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); pub.Run(ctx) }()
	return pub.Ready, func() { <-done; lister.Close(context.Background()); stopEvents() }, nil
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
