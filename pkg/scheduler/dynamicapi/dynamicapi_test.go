package dynamicapi

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
)

// handle is a framework handle with only a kubeconfig (nil: none).
type handle struct {
	fwk.Handle
	cfg *rest.Config
}

func (h handle) KubeConfig() *rest.Config { return h.cfg }

func TestClientsNeedAKubeconfig(t *testing.T) {
	if _, _, err := Clients("Plugin", handle{}); err == nil || !strings.Contains(err.Error(), "Plugin: the framework handle has no kubeconfig") {
		t.Errorf("no kubeconfig: err %v", err)
	}
	dyn, disc, err := Clients("Plugin", handle{cfg: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil || dyn == nil || disc == nil {
		t.Errorf("kubeconfig: %v, %v, %v", dyn, disc, err)
	}
}

func TestStartWhenServedRetriesUntilServed(t *testing.T) {
	for _, tc := range []struct {
		name        string
		servedAfter int32 // the try that succeeds (1 = the first)
		wantTries   int32
	}{
		{"served at once: no background retry", 1, 1},
		{"served on the third try", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var tries atomic.Int32
			var firsts atomic.Int32
			StartWhenServed(ctx, time.Millisecond, func(first bool) bool {
				if first {
					firsts.Add(1)
				}
				return tries.Add(1) >= tc.servedAfter
			})
			deadline := time.Now().Add(5 * time.Second)
			for tries.Load() < tc.wantTries && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // a loop that kept going would add tries
			if got := tries.Load(); got != tc.wantTries {
				t.Errorf("%d tries, want %d", got, tc.wantTries)
			}
			if firsts.Load() != 1 {
				t.Errorf("%d tries marked first, want 1", firsts.Load())
			}
		})
	}
}

func TestStartWhenServedStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var tries atomic.Int32
	StartWhenServed(ctx, time.Millisecond, func(bool) bool { tries.Add(1); return false })
	for tries.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	time.Sleep(20 * time.Millisecond)
	n := tries.Load()
	time.Sleep(50 * time.Millisecond)
	if tries.Load() != n {
		t.Errorf("tries went on after the context ended: %d then %d", n, tries.Load())
	}
}
