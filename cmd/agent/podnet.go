package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/pkg/agent"
	"github.com/berth-sched/berth/pkg/agent/podnet"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// bindPolicyFlags registers the PodConfig policy flags, the operator's own (the chart passes
// both the same podConfig values), and returns a function that parses them after fs.Parse.
func bindPolicyFlags(fs *flag.FlagSet) func() (podconfig.Policy, error) {
	prefix := fs.String("podconfig-bridge-prefix", podconfig.DefaultBridgePrefix,
		"prefix every PodConfig bridge (master) must carry unless --podconfig-allowed-bridges names it")
	bridges := fs.String("podconfig-allowed-bridges", "", "comma-separated existing bridges PodConfigs may join besides the prefixed ones")
	parents := fs.String("podconfig-allowed-parents", "", "comma-separated host interfaces whose VLANs PodConfigs may use (linkType vlan); empty: none")
	cidrs := fs.String("podconfig-cluster-cidrs", "", "comma-separated pod and service CIDRs of the cluster: PodConfig networks overlapping them are refused")
	return func() (podconfig.Policy, error) {
		p := podconfig.Policy{BridgePrefix: *prefix, AllowedBridges: splitList(*bridges), AllowedParents: splitList(*parents)}
		var err error
		if p.ClusterCIDRs, err = podconfig.ParseCIDRs(splitList(*cidrs)); err != nil {
			return p, fmt.Errorf("--podconfig-cluster-cidrs: %w", err)
		}
		return p, p.Check()
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// runPodNet starts the PodConfig executor in the background; the returned function waits for
// it to stop (after ctx is done) and releases its handles.
func runPodNet(ctx context.Context, nodeName, criSocket, procRoot string, resync time.Duration, policy podconfig.Policy, a *agent.Agent, rc *rest.Config) (func(), error) {
	// The node's namespace is the agent's own: the DaemonSet runs with hostNetwork (and the
	// e2e harness starts it inside the node's namespace).
	hostNS, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("the agent's network namespace: %w", err)
	}
	links, err := podnet.NewLinks(hostNS)
	if err != nil {
		hostNS.Close()
		return nil, err
	}
	resolver := podnet.NewCRIResolver(criSocket, procRoot, 10*time.Second)
	dyn := dynamic.NewForConfigOrDie(rc)
	ex, start, err := podnet.NewForCluster(podnet.Config{
		NodeName: nodeName, Resolver: resolver, Dataplane: links,
		Status: podnet.DynamicStatus{Client: dyn, NodeName: nodeName},
		Resync: resync, Registerer: a.Registry(), Policy: policy,
	}, kubernetes.NewForConfigOrDie(rc), dyn)
	if err != nil {
		links.Close()
		hostNS.Close()
		return nil, err
	}
	// Not ready until the informers have synced and the runtime has answered once.
	a.AddReadyCheck("podconfig", ex.Ready)
	start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); ex.Run(ctx) }()
	return func() {
		<-done
		resolver.Close(context.Background())
		links.Close()
		hostNS.Close()
	}, nil
}
