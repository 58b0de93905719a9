package podnet

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func (e *Executor) enqueueObj(o any) {
	if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
		e.queue.Add(k)
	}
}

func (e *Executor) enqueueAll() {
	for _, k := range e.podConfigs.ListKeys() {
		e.queue.Add(k)
	}
}

func (e *Executor) enqueueNamespace(ns string) {
	objs, _ := e.podConfigs.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range objs {
		e.enqueueObj(o)
	}
}

// Run waits for the caches, sweeps once, then reconciles until ctx is done (one worker: the
// node's links are changed by one goroutine only).
func (e *Executor) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("node", e.cfg.NodeName)
	defer e.queue.ShutDown()
	go e.reachRuntime(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), e.synced...) {
		return
	}
	log.Info("PodConfig executor started", "resync", e.cfg.Resync)
	e.queue.Add(sweepKey)
	e.enqueueAll()
	go func() {
		t := time.NewTicker(e.cfg.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				e.queue.ShutDown()
				return
			case <-t.C:
				e.queue.Add(sweepKey)
				e.enqueueAll()
			}
		}
	}()
	for e.processNext(ctx) {
	}
	log.Info("PodConfig executor stopped")
}

func (e *Executor) processNext(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	var err error
	var requeue time.Duration
	if key == sweepKey {
		err = e.Sweep(ctx)
	} else {
		requeue, err = e.Sync(ctx, key)
	}
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "PodConfig sync failed", "key", key)
		e.queue.AddRateLimited(key)
	case requeue > 0:
		e.queue.Forget(key)
		e.queue.AddAfter(key, requeue)
	default:
		e.queue.Forget(key)
	}
	return true
}

// retryAfter is when an entry waiting for something outside the API (a sandbox being
// created, a runtime coming back, a namespace being replaced) is looked at again.
const retryAfter = 2 * time.Second
