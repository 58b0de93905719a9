package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// These tests run the real control-plane binaries from bin/ (`make tools`).

func TestStartRefusesMissingBinaries(t *testing.T) {
	_, err := Start(context.Background(), Config{BinDir: t.TempDir()})
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != Etcd || !errors.Is(err, ErrMissingBinary) || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("want an etcd missing-binary error naming `make tools`, got %v", err)
	}
}

func TestStartRefusesTakenPortAndStartsNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var started []*Process
	_, err = Start(context.Background(), Config{APIServerPort: l.Addr().(*net.TCPAddr).Port,
		OnProcess: func(p *Process) { started = append(started, p) }})
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != APIServer || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("want a kube-apiserver port error, got %v", err)
	}
	if len(started) != 0 {
		t.Errorf("started %d processes before refusing", len(started))
	}
}

func TestFailedComponentStopsEverything(t *testing.T) {
	var mu sync.Mutex
	var started []*Process
	_, err := Start(context.Background(), Config{
		WithoutKWOK: true, WithoutDefaultScheduler: true,
		ExtraArgs: map[string][]string{ControllerManager: {"--no-such-flag"}},
		OnProcess: func(p *Process) { mu.Lock(); started = append(started, p); mu.Unlock() },
	})
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != ControllerManager {
		t.Fatalf("want a kube-controller-manager error, got %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error should carry the component's log tail; got:\n%v", err)
	}
	if len(started) != 3 {
		t.Fatalf("expected etcd, apiserver and controller-manager to have started, got %d", len(started))
	}
	for _, p := range started {
		if exited, _ := p.Exited(); !exited {
			t.Errorf("%s (pid %d) left running after the failed start", p.Name, p.PID())
		}
	}
}

func TestTwoClustersSideBySide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var clusters [2]*Cluster
	var errs [2]error
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = Start(ctx, Config{WithoutDefaultScheduler: true})
		}()
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			t.Cleanup(c.Stop)
		}
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
	}
	if clusters[0].Host == clusters[1].Host {
		t.Fatalf("both clusters on %s", clusters[0].Host)
	}
	for i, c := range clusters {
		spec := NodeSpec{Name: []string{"left", "right"}[i], CPU: "8", Memory: "16Gi", Pods: 30,
			Labels: map[string]string{"berth.io/side": "yes"}}
		if err := c.AddNodes(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clusters {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Name != []string{"left", "right"}[i] {
			t.Fatalf("cluster %d sees nodes %v", i, nodes.Items)
		}
		n := nodes.Items[0]
		if n.Status.Allocatable.Cpu().String() != "8" || n.Status.Allocatable.Pods().Value() != 30 || n.Labels["berth.io/side"] != "yes" {
			t.Errorf("node %s lost its spec: allocatable %v labels %v", n.Name, n.Status.Allocatable, n.Labels)
		}
	}
	dir := clusters[0].Dir
	clusters[0].Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary cluster dir %s left behind", dir)
	}
	// The other cluster is unaffected.
	if _, err := clusters[1].Client.Discovery().ServerVersion(); err != nil {
		t.Errorf("second cluster died with the first: %v", err)
	}
}

func TestDetachedClusterStopsWithDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var procs []*Process
	c, err := Start(ctx, Config{Dir: dir, Detach: true, WithoutKWOK: true, WithoutDefaultScheduler: true, WithoutControllerManager: true,
		OnProcess: func(p *Process) { procs = append(procs, p) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop) // only acts if Down failed
	if err := Down(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(15 * time.Second):
			t.Errorf("%s still running after Down", p.Name)
		}
	}
}
