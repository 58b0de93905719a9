// Package dynamicapi is what Berth's plugins that read CRDs the scheduler has no typed client
// for (Security Profiles Operator profiles, NodeImages) share: clients from the framework
// handle's kubeconfig, and starting their informers once the API is served.
package dynamicapi

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	fwk "k8s.io/kube-scheduler/framework"
)

// RetryEvery is how often StartWhenServed tries again while the API is not served.
const RetryEvery = 30 * time.Second

// Clients builds a dynamic and a discovery client from h's kubeconfig; errors name plugin.
func Clients(plugin string, h fwk.Handle) (dynamic.Interface, discovery.DiscoveryInterface, error) {
	cfg := h.KubeConfig()
	if cfg == nil {
		return nil, nil, fmt.Errorf("%s: the framework handle has no kubeconfig", plugin)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: dynamic client: %w", plugin, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: discovery client: %w", plugin, err)
	}
	return dyn, disc, nil
}

// StartWhenServed calls try at once (first true), and if it reports the API not served (false),
// again every interval in the background until it succeeds or ctx ends. why: a plugin must not
// stop the scheduler from starting because a CRD is installed after it; it works without the
// API meanwhile and picks it up when it appears.
func StartWhenServed(ctx context.Context, interval time.Duration, try func(first bool) bool) {
	if try(true) {
		return
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if try(false) {
					return
				}
			}
		}
	}()
}
