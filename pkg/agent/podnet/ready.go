package podnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// Pinger is a Resolver that can say whether its runtime answers (CRIResolver does).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ready is the executor's part of the agent's /readyz: nil once its informers (PodConfigs,
// IPAllocations, the node's pods) have synced and the container runtime has answered once.
// A runtime that goes away later does not make the agent unready: entries say so, and the
// links already made keep working.
func (e *Executor) Ready() error {
	if !e.HasSynced() {
		return errors.New("PodConfig executor: informers (podconfigs, podnetworks, ipallocations, namespaces, pods) not synced yet")
	}
	if !e.runtimeSeen.Load() {
		why := "not tried yet"
		if p := e.runtimeErr.Load(); p != nil {
			why = *p
		}
		return fmt.Errorf("PodConfig executor: container runtime not reached yet: %s", why)
	}
	return nil
}

// reachRuntime pings the runtime every pingEvery (retryAfter) until it answers once.
func (e *Executor) reachRuntime(ctx context.Context) {
	p, ok := e.cfg.Resolver.(Pinger)
	if !ok {
		e.runtimeSeen.Store(true)
		return
	}
	log := klog.FromContext(ctx)
	for {
		err := p.Ping(ctx)
		if err == nil {
			e.runtimeSeen.Store(true)
			log.Info("Container runtime reached")
			return
		}
		msg := err.Error()
		if prev := e.runtimeErr.Swap(&msg); prev == nil || *prev != msg {
			log.Error(err, "Container runtime not reachable; not ready until it answers")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.pingEvery):
		}
	}
}
