package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

func newClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).Build()
}

func network(t *testing.T, master, cidr, gw string) podconfig.Network {
	t.Helper()
	// One PodNetwork per (bridge, range) in these tests; the name is the pool's.
	name := master + "-" + strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(cidr)
	n, err := podconfig.NetworkOf(&berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: master, CIDR: cidr, Gateway: gw}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func owner(i int) Owner {
	return Owner{PodNamespace: "ns", PodName: fmt.Sprintf("p%d", i), PodUID: types.UID(fmt.Sprintf("uid-%d", i)), PodConfig: "pc", Attachment: "net1", Node: "n1"}
}

func TestAllocateSequences(t *testing.T) {
	cases := []struct {
		name, cidr, gw string
		pods           int
		want           []string // "" = exhausted
	}{
		{"v4 /30 exhausts after one", "10.9.0.0/30", "10.9.0.1", 2, []string{"10.9.0.2", ""}},
		{"v4 /30 without gateway has two", "10.9.0.0/30", "", 3, []string{"10.9.0.1", "10.9.0.2", ""}},
		{"v6 /120", "fd00:1::/120", "fd00:1::1", 3, []string{"fd00:1::2", "fd00:1::3", "fd00:1::4"}},
		{"v6 /127 has two", "fd00:1::/127", "", 3, []string{"fd00:1::", "fd00:1::1", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			a := &Allocator{Client: c, Reader: c}
			n := network(t, "berth0", tc.cidr, tc.gw)
			for i := 0; i < tc.pods; i++ {
				got, err := a.Allocate(context.Background(), n, owner(i))
				if tc.want[i] == "" {
					if !errors.Is(err, ErrExhausted) {
						t.Fatalf("pod %d: got %v, %v; want exhausted", i, got, err)
					}
					continue
				}
				if err != nil || got != netip.MustParseAddr(tc.want[i]) {
					t.Fatalf("pod %d: got %v, %v; want %s", i, got, err, tc.want[i])
				}
			}
		})
	}
}

// Release frees the address for the next pod; allocation is idempotent per pod and
// attachment; and a new allocator (an operator restart or another leader) sees everything
// the old one wrote because nothing lives in memory.
func TestReleaseIdempotenceRestart(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	n := network(t, "berth0", "10.9.0.0/29", "10.9.0.1")
	a := &Allocator{Client: c, Reader: c}
	first, err := a.Allocate(ctx, n, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Allocate(ctx, n, owner(1))
	if err != nil || again != first {
		t.Fatalf("second Allocate for the same owner = %v, %v; want %v", again, err, first)
	}
	second, _ := a.Allocate(ctx, n, owner(2))

	restarted := &Allocator{Client: c, Reader: c}
	third, err := restarted.Allocate(ctx, n, owner(3))
	if err != nil || third == first || third == second {
		t.Fatalf("after restart got %v (%v); must differ from %v and %v", third, err, first, second)
	}
	if got, _ := restarted.Allocate(ctx, n, owner(1)); got != first {
		t.Fatalf("after restart owner 1 got %v, want its old %v", got, first)
	}
	if err := restarted.Release(ctx, n.Name, owner(1).PodUID, "net1"); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Release(ctx, n.Name, owner(1).PodUID, "net1"); err != nil {
		t.Fatalf("releasing twice: %v", err)
	}
	if got, _ := restarted.Allocate(ctx, n, owner(4)); got != first {
		t.Fatalf("freed %v should be reused first, got %v", first, got)
	}
	obj := &berthv1alpha1.IPAllocation{}
	if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, obj); err != nil {
		t.Fatal(err)
	}
	if obj.Status.Used != 3 || obj.Status.Free != "2" || obj.Spec.Gateway != "10.9.0.1" || obj.Spec.CIDR != "10.9.0.0/29" {
		t.Fatalf("summary/spec wrong: %+v %+v", obj.Spec, obj.Status)
	}
	// Empty pools are deleted only when empty.
	if err := a.DeleteIfEmpty(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, obj); err != nil {
		t.Fatalf("non-empty pool deleted: %v", err)
	}
	for _, o := range []Owner{owner(2), owner(3), owner(4)} {
		if err := a.Release(ctx, n.Name, o.PodUID, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.DeleteIfEmpty(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, obj); err == nil {
		t.Fatal("empty pool not deleted")
	}
}

func TestGatewayMismatchRefused(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	a := &Allocator{Client: c, Reader: c}
	if _, err := a.Allocate(ctx, network(t, "berth0", "10.9.0.0/24", "10.9.0.1"), owner(1)); err != nil {
		t.Fatal(err)
	}
	_, err := a.Allocate(ctx, network(t, "berth0", "10.9.0.0/24", "10.9.0.254"), owner(2))
	if !errors.Is(err, ErrNetworkMismatch) {
		t.Fatalf("got %v, want ErrNetworkMismatch", err)
	}
}

// Many allocators (as many operator replicas) race on one pool through a store that enforces
// resourceVersions: every pod gets an address, and no address is given twice.
func TestConcurrentAllocatorsNeverDuplicate(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	n := network(t, "berth0", "10.20.0.0/25", "10.20.0.1")
	const workers, perWorker = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a := &Allocator{Client: c, Reader: c, MaxAttempts: 200}
			for i := 0; i < perWorker; i++ {
				if _, err := a.Allocate(ctx, n, owner(w*perWorker+i)); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	obj := &berthv1alpha1.IPAllocation{}
	if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, obj); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range obj.Spec.Allocations {
		if prev, dup := seen[e.Address]; dup {
			t.Fatalf("address %s given to %s and %s", e.Address, prev, e.PodUID)
		}
		seen[e.Address] = e.PodUID
	}
	if len(seen) != workers*perWorker {
		t.Fatalf("%d allocations, want %d", len(seen), workers*perWorker)
	}
}
