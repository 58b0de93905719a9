package cluster

// Where Karpenter's sockets live. Karpenter binds its metrics and health-probe servers to
// ":<port>" (operator.go formats the address itself; there is no setting for the host), so
// run in the machine's root network namespace they listen on every interface, against the
// project's rule that test servers listen on loopback or inside namespaces the run made. Rather
// than patch Karpenter, the harness gives it a namespace whose only interface is its own
// loopback:
//   - a cluster with real nodes already has one (realnode_netns.go): Karpenter runs there like
//     every control-plane component;
//   - otherwise, as root, a namespace of its own under the cluster Dir, with the API server's
//     port relayed in (the kubeconfig's 127.0.0.1:<port> works inside) and its two ports relayed
//     out to the root namespace's 127.0.0.1 (the readiness check and a curious operator);
//   - without root no namespace can be made: Karpenter runs beside the cluster as before and
//     the harness says, once, that its ports are open on every interface.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// karpenterPlace is where StartKarpenter runs Karpenter's process.
type karpenterPlace int

const (
	// karpenterClusterNS: the real nodes' namespace (the control plane's).
	karpenterClusterNS karpenterPlace = iota
	// karpenterOwnNS: a namespace made for Karpenter alone.
	karpenterOwnNS
	// karpenterRootNS: the machine's root namespace, its ports on every interface.
	karpenterRootNS
)

// karpenterHost is what placeKarpenter decides from.
type karpenterHost struct {
	clusterNS bool   // the cluster runs real nodes in a namespace of its own
	root      bool   // effective uid 0: namespaces and mounts can be made
	detach    bool   // processes outlive this program, and with it any relay
	missing   string // a tool the own namespace needs that is not installed
}

// placeKarpenter chooses Karpenter's namespace; for the root namespace it also says why no
// other would do, for the warning.
func placeKarpenter(h karpenterHost) (karpenterPlace, string) {
	switch {
	case h.clusterNS:
		return karpenterClusterNS, ""
	case !h.root:
		return karpenterRootNS, "the harness is not running as root, so it cannot create a network namespace for Karpenter"
	case h.detach:
		return karpenterRootNS, "the cluster is detached, and the relay of the API server into Karpenter's namespace would end with this program"
	case h.missing != "":
		return karpenterRootNS, fmt.Sprintf("%s is not installed, and the harness needs it to run Karpenter in a network namespace", h.missing)
	}
	return karpenterOwnNS, ""
}

// karpenterRootWarning makes the root-namespace warning once per program: every suite start
// would repeat the same sentence.
var karpenterRootWarning sync.Once

// karpenterNet is Karpenter's network placement, undone by close after the process ends.
type karpenterNet struct {
	place karpenterPlace
	// own namespace: its bind mount, the relays in and out, and nsenter to start the process.
	ns      *netNS
	fwd     *forwarder
	nsenter string
	// relayed are the ports held on the root namespace's loopback for Karpenter.
	relayed []int
}

// karpenterNetwork prepares the namespace Karpenter will run in and relays ports (its metrics
// and health ports) out of it to the root namespace's loopback.
func (c *Cluster) karpenterNetwork(ports ...int) (*karpenterNet, error) {
	rs := c.realNodes()
	h := karpenterHost{clusterNS: rs != nil && rs.fwd != nil, root: os.Geteuid() == 0, detach: c.cfg.Detach}
	nsenter, err := lookTool("nsenter")
	if err != nil {
		h.missing = "nsenter"
	}
	ip, err := lookTool("ip")
	if err != nil && h.missing == "" {
		h.missing = "ip"
	}
	place, why := placeKarpenter(h)
	switch place {
	case karpenterClusterNS:
		kn := &karpenterNet{place: place, fwd: rs.fwd}
		return kn, kn.relayOut(ports)
	case karpenterRootNS:
		karpenterRootWarning.Do(func() {
			log.Printf("berth e2e: Karpenter's metrics and health-probe servers listen on every interface of this machine (Karpenter binds \":<port>\" with no address setting): %s", why)
		})
		c.cfg.Logf("karpenter runs in the root network namespace: %s", why)
		return &karpenterNet{place: place}, nil
	}
	return c.karpenterOwnNetNS(nsenter, ip, ports)
}

// karpenterOwnNetNS creates Karpenter's namespace under the cluster Dir, brings its loopback
// up, relays the API server's port in and ports out. Anything that fails undoes what was made.
func (c *Cluster) karpenterOwnNetNS(nsenter, ip string, ports []int) (*karpenterNet, error) {
	apiPort, err := hostPort(c.Host)
	if err != nil {
		return nil, err
	}
	ns, err := createNetNS(filepath.Join(c.Dir, "karpenter-netns", "net"))
	if err != nil {
		return nil, fmt.Errorf("creating Karpenter's network namespace: %w", err)
	}
	kn := &karpenterNet{place: karpenterOwnNS, ns: ns, fwd: newForwarder(ns), nsenter: nsenter}
	// A new namespace's loopback is down: nothing, not even 127.0.0.1, answers until it is up.
	if _, err := run(context.Background(), nsenter, "--net="+ns.Path, "--", ip, "link", "set", "lo", "up"); err != nil {
		return nil, errors.Join(err, kn.close())
	}
	if err := kn.fwd.expose(apiPort); err != nil {
		return nil, errors.Join(fmt.Errorf("relaying the API server (127.0.0.1:%d) into Karpenter's namespace: %w", apiPort, err), kn.close())
	}
	if err := kn.relayOut(ports); err != nil {
		return nil, errors.Join(err, kn.close())
	}
	return kn, nil
}

// relayOut holds ports on the root namespace's 127.0.0.1, each relayed to the same port inside.
func (kn *karpenterNet) relayOut(ports []int) error {
	for _, p := range ports {
		if err := kn.fwd.forward(p); err != nil {
			return fmt.Errorf("relaying Karpenter's port %d to the root namespace's loopback: %w", p, err)
		}
		kn.relayed = append(kn.relayed, p)
	}
	return nil
}

// startKarpenterIn runs spec in the chosen namespace and waits until check passes.
func (c *Cluster) startKarpenterIn(ctx context.Context, kn *karpenterNet, spec ProcessSpec, check func(context.Context) error) (*Process, error) {
	if kn.place != karpenterOwnNS {
		// StartComponent puts it in the cluster's namespace when there is one.
		return c.StartComponent(ctx, spec, check)
	}
	spec.Args = append(spec.Args, c.cfg.ExtraArgs[spec.Name]...)
	return c.launch(ctx, inNetNS(spec, kn.nsenter, kn.ns.Path), check)
}

// close ends the relays and, for Karpenter's own namespace, unmounts and removes it: with its
// process gone that was the namespace's last reference, and the kernel frees it.
func (kn *karpenterNet) close() error {
	if kn == nil {
		return nil
	}
	if kn.place == karpenterClusterNS {
		// The cluster's forwarder outlives Karpenter: drop only Karpenter's ports.
		for _, p := range kn.relayed {
			kn.fwd.unrelay(p)
		}
		return nil
	}
	if kn.ns == nil {
		return nil
	}
	kn.fwd.close()
	kn.ns.close()
	var errs []error
	if err := unix.Unmount(kn.ns.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmounting Karpenter's network namespace %s: %w", kn.ns.Path, err))
	}
	for _, p := range []string{kn.ns.Path, filepath.Dir(kn.ns.Path)} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	kn.ns = nil
	return errors.Join(errs...)
}

// hostPort is the port of a URL such as the cluster's Host (https://127.0.0.1:port).
func hostPort(u string) (int, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(pu.Port())
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("no port in %q", u)
	}
	return p, nil
}
