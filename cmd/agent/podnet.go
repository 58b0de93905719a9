package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/pkg/agent"
	"github.com/berth-sched/berth/pkg/agent/podnet"
	"github.com/berth-sched/berth/pkg/podconfig"
)

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
