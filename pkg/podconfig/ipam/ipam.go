// Package ipam allocates PodConfig addresses from IPAllocation objects. The API object is the
// only truth: every allocation reads the object, picks the first free address and writes it
// back with the resourceVersion it read, so a concurrent writer (another replica, a previous
// leader still finishing, a restarted operator) makes the write fail with a conflict and the
// allocation is redone on fresh data. Nothing is remembered in memory between calls, so a
// restart cannot forget an address and hand it out again.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// ErrExhausted: the network has no free address.
var ErrExhausted = errors.New("exhausted")

// ErrNetworkMismatch: the IPAllocation with the network's name describes another network
// (a different gateway, or a hash collision of master and CIDR).
var ErrNetworkMismatch = errors.New("network mismatch")

// Owner is who an address is for.
type Owner struct {
	PodNamespace string
	PodName      string
	PodUID       types.UID
	PodConfig    string
	Attachment   string
	Node         string
}

// Allocator allocates and releases addresses.
type Allocator struct {
	// Client writes IPAllocations.
	Client client.Client
	// Reader reads them; it should read the API server (a manager's APIReader), not a cache,
	// so a conflict is followed by a fresh read. A cache is safe too (the write still carries
	// the resourceVersion), only slower to converge.
	Reader client.Reader
	// MaxAttempts bounds retries on conflicts (default 20).
	MaxAttempts int
}

func (a *Allocator) attempts() int {
	if a.MaxAttempts > 0 {
		return a.MaxAttempts
	}
	return 20
}

// Lookup returns the address held by (podUID, attachment) in obj, if any.
func Lookup(obj *berthv1alpha1.IPAllocation, podUID types.UID, attachment string) (netip.Addr, bool) {
	for _, e := range obj.Spec.Allocations {
		if e.PodUID == string(podUID) && e.Attachment == attachment {
			if a, err := netip.ParseAddr(e.Address); err == nil {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// Allocate returns the address of owner in n, allocating the first free one if owner has
// none yet. It is idempotent: the same owner (pod UID and attachment) always gets the address
// it already holds.
func (a *Allocator) Allocate(ctx context.Context, n podconfig.Network, o Owner) (netip.Addr, error) {
	name := n.Name
	var lastErr error
	for attempt := 0; attempt < a.attempts(); attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return netip.Addr{}, err
			}
		}
		obj := &berthv1alpha1.IPAllocation{}
		err := a.Reader.Get(ctx, client.ObjectKey{Name: name}, obj)
		if apierrors.IsNotFound(err) {
			addr, ok := podconfig.FirstFree(n.Prefix, n.Gateway, nil)
			if !ok {
				return netip.Addr{}, fmt.Errorf("network %s %w", n, ErrExhausted)
			}
			obj = newObject(n)
			obj.Spec.Allocations = []berthv1alpha1.Allocation{entry(addr, o)}
			summarise(obj, n)
			err := a.Client.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				lastErr = err
				continue // another writer created it first: read theirs
			}
			if err != nil {
				return netip.Addr{}, err
			}
			return addr, nil
		}
		if err != nil {
			return netip.Addr{}, err
		}
		if err := check(obj, n); err != nil {
			return netip.Addr{}, err
		}
		if addr, ok := Lookup(obj, o.PodUID, o.Attachment); ok {
			return addr, nil
		}
		addr, ok := podconfig.FirstFree(n.Prefix, n.Gateway, used(obj))
		if !ok {
			return netip.Addr{}, fmt.Errorf("network %s %w", n, ErrExhausted)
		}
		obj.Spec.Allocations = append(obj.Spec.Allocations, entry(addr, o))
		summarise(obj, n)
		err = a.Client.Update(ctx, obj)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			lastErr = err
			continue // someone wrote (or deleted) it since we read: redo on fresh data
		}
		if err != nil {
			return netip.Addr{}, err
		}
		return addr, nil
	}
	return netip.Addr{}, fmt.Errorf("allocating in %s: gave up after %d conflicts: %w", n, a.attempts(), lastErr)
}

// Release frees the addresses matching (podUID, attachment) in the network named name. An
// empty attachment frees every address of the pod in that network. Releasing what is not
// allocated is not an error.
func (a *Allocator) Release(ctx context.Context, name string, podUID types.UID, attachment string) error {
	var lastErr error
	for attempt := 0; attempt < a.attempts(); attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		}
		obj := &berthv1alpha1.IPAllocation{}
		if err := a.Reader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		kept := obj.Spec.Allocations[:0:0]
		for _, e := range obj.Spec.Allocations {
			if e.PodUID == string(podUID) && (attachment == "" || e.Attachment == attachment) {
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) == len(obj.Spec.Allocations) {
			return nil
		}
		obj.Spec.Allocations = kept
		if n, err := networkOfObject(obj); err == nil {
			summarise(obj, n)
		}
		err := a.Client.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			lastErr = err
			continue
		}
		return client.IgnoreNotFound(err)
	}
	return fmt.Errorf("releasing in %s: gave up after %d conflicts: %w", name, a.attempts(), lastErr)
}

// DeleteIfEmpty deletes the network's IPAllocation if it holds no address, guarded by the
// resourceVersion it read: an allocation written in between makes the delete fail, not vanish.
func (a *Allocator) DeleteIfEmpty(ctx context.Context, name string) error {
	obj := &berthv1alpha1.IPAllocation{}
	if err := a.Reader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if len(obj.Spec.Allocations) > 0 {
		return nil
	}
	rv := obj.ResourceVersion
	err := a.Client.Delete(ctx, obj, &client.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if apierrors.IsConflict(err) {
		return nil // written since: not empty any more, or will be looked at again
	}
	return client.IgnoreNotFound(err)
}

func newObject(n podconfig.Network) *berthv1alpha1.IPAllocation {
	obj := &berthv1alpha1.IPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name},
		Spec:       berthv1alpha1.IPAllocationSpec{Master: n.Bridge, CIDR: n.Prefix.String()},
	}
	if n.Gateway.IsValid() {
		obj.Spec.Gateway = n.Gateway.String()
	}
	return obj
}

func entry(addr netip.Addr, o Owner) berthv1alpha1.Allocation {
	return berthv1alpha1.Allocation{
		Address: addr.String(), PodNamespace: o.PodNamespace, PodName: o.PodName, PodUID: string(o.PodUID),
		PodConfig: o.PodConfig, Attachment: o.Attachment, Node: o.Node,
	}
}

// check refuses an object that is not the network n: a PodNetwork deleted and re-created under
// the same name with another range, bridge or gateway while addresses of the old one were
// still held (its finalizer should prevent that; the pool is never silently reinterpreted).
func check(obj *berthv1alpha1.IPAllocation, n podconfig.Network) error {
	got, err := networkOfObject(obj)
	if err != nil {
		return fmt.Errorf("IPAllocation %s: %w", obj.Name, err)
	}
	if got.Bridge != n.Bridge || got.Prefix != n.Prefix {
		return fmt.Errorf("IPAllocation %s is network %s, not %s: %w", obj.Name, got, n, ErrNetworkMismatch)
	}
	if got.Gateway != n.Gateway {
		return fmt.Errorf("network %s has gateway %q, not %q: %w", n, obj.Spec.Gateway, addrString(n.Gateway), ErrNetworkMismatch)
	}
	return nil
}

func networkOfObject(obj *berthv1alpha1.IPAllocation) (podconfig.Network, error) {
	return podconfig.NetworkOf(&berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: obj.Name},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: obj.Spec.Master, CIDR: obj.Spec.CIDR, Gateway: obj.Spec.Gateway}})
}

func used(obj *berthv1alpha1.IPAllocation) []netip.Addr {
	out := make([]netip.Addr, 0, len(obj.Spec.Allocations))
	for _, e := range obj.Spec.Allocations {
		if a, err := netip.ParseAddr(e.Address); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func summarise(obj *berthv1alpha1.IPAllocation, n podconfig.Network) {
	obj.Status.Used = int64(len(obj.Spec.Allocations))
	obj.Status.Free = freeCount(n, len(obj.Spec.Allocations))
}

func freeCount(n podconfig.Network, used int) string {
	free := podconfig.Usable(n.Prefix, n.Gateway)
	free.Sub(free, big.NewInt(int64(used)))
	if free.Sign() < 0 {
		return "0"
	}
	return free.String()
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// backoff waits a little, longer and jittered by attempt, so racing writers spread out.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt*attempt) * 5 * time.Millisecond
	d += time.Duration(time.Now().UnixNano()%int64(5*time.Millisecond)) * time.Duration(min(attempt, 4))
	if d > time.Second {
		d = time.Second
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
