package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// The cluster's network namespace. Why a namespace of its own with no link to the root one:
// the issue asks that no bridge, node, pod or service address exist in the machine's root
// namespace. Why no veth either: every component and suite addresses the cluster as
// 127.0.0.1:<port> (kubeconfigs, health checks, berth binaries' flags). The harness instead
// dials into the namespace from a thread that setns(2)-ed into it, and holds each component
// port on the root namespace's loopback with a forwarder, so 127.0.0.1:<port> means the same
// component from inside and outside, and nothing routable is added to the root namespace.

// netNS is a network namespace pinned by a bind mount under the cluster Dir (not /run/netns,
// whose first use leaves a shared mount behind).
type netNS struct {
	Path string // bind mount of the namespace; nsenter --net=Path runs a command inside
	fd   *os.File
}

func createNetNS(path string) (*netNS, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return nil, err
	}
	err := onThread(-1, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting the namespace at %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	fd, err := os.Open(path)
	if err != nil {
		_ = unix.Unmount(path, unix.MNT_DETACH)
		return nil, err
	}
	return &netNS{Path: path, fd: fd}, nil
}

// Inode identifies the namespace (as /proc/<pid>/ns/net links show it: net:[inode]).
func (n *netNS) Inode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(n.fd.Fd()), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// dial connects to addr from inside the namespace: the socket is created by a thread that
// joined the namespace, and a socket stays in the namespace it was created in.
func (n *netNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.runIn(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listen opens a listener inside the namespace (the socket stays in the namespace it was
// created in, whichever thread accepts on it).
func (n *netNS) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.runIn(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// runIn runs f on a thread inside the namespace (dials, /proc/sys/net writes).
func (n *netNS) runIn(f func() error) error {
	return onThread(int(n.fd.Fd()), f)
}

// onThread runs f on a locked OS thread that first joins the network namespace nsFD (-1: stays
// put, for f to unshare), and moves the thread back to its own namespace afterwards.
//
// Why the thread is restored rather than retired: the runtime would end a thread that exits
// locked, and a child forked earlier from that thread with Pdeathsig (every component process)
// would be killed with it.
func onThread(nsFD int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if nsFD >= 0 {
			if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				errc <- fmt.Errorf("setns: %w", err)
				return
			}
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the runtime retires a thread it cannot trust.
			errc <- errors.Join(ferr, fmt.Errorf("returning to the host namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func (n *netNS) close() {
	if n.fd != nil {
		n.fd.Close()
	}
}

// forwarder relays loopback ports between the root namespace and the cluster's: forward holds
// a port on the root namespace's 127.0.0.1 for a component inside (the harness reaches the
// cluster), expose holds one on the namespace's 127.0.0.1 for a server of the harness outside
// (the API server reaches a webhook a test serves from its own process).
type forwarder struct {
	ns *netNS
	mu sync.Mutex
	ls map[int]net.Listener
	cs map[net.Conn]struct{}
}

func newForwarder(ns *netNS) *forwarder {
	return &forwarder{ns: ns, ls: map[int]net.Listener{}, cs: map[net.Conn]struct{}{}}
}

// forward starts relaying port (once). A port taken in the root namespace by something else
// is left alone: it is not one of the cluster's, and the component cannot reach it anyway.
func (f *forwarder) forward(port int) error {
	return f.relay(port, func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) },
		func(ctx context.Context, addr string) (net.Conn, error) { return f.ns.dial(ctx, "tcp", addr) })
}

// expose relays connections to port on the namespace's loopback to the same port on the root
// namespace's loopback. Ports share one table with forward: a port relayed one way cannot be
// relayed the other, which would loop.
func (f *forwarder) expose(port int) error {
	return f.relay(port, func(addr string) (net.Listener, error) { return f.ns.listen("tcp", addr) },
		func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		})
}

// unrelay stops relaying port and closes the listener (connections already relayed finish).
func (f *forwarder) unrelay(port int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.ls[port]; ok {
		l.Close()
		delete(f.ls, port)
	}
}

func (f *forwarder) relay(port int, listen func(string) (net.Listener, error), dial func(context.Context, string) (net.Conn, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ls == nil {
		return errors.New("forwarder closed")
	}
	if _, ok := f.ls[port]; ok {
		return nil
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := listen(addr)
	if err != nil {
		return err
	}
	f.ls[port] = l
	go f.serve(l, addr, dial)
	return nil
}

func (f *forwarder) serve(l net.Listener, target string, dial func(context.Context, string) (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			out, err := dial(context.Background(), target)
			if err != nil {
				in.Close()
				return
			}
			if !f.track(in, out) {
				in.Close()
				out.Close()
				return
			}
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(out, in)
			go pipe(in, out)
			<-done
			<-done
			in.Close()
			out.Close()
			f.untrack(in, out)
		}()
	}
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cs == nil {
		return false
	}
	for _, c := range cs {
		f.cs[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.cs, c)
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.ls {
		l.Close()
	}
	for c := range f.cs {
		c.Close()
	}
	f.ls, f.cs = nil, nil
}

var (
	loopbackPortRe = regexp.MustCompile(`(?:127\.0\.0\.1|localhost):(\d{1,5})\b`)
	securePortRe   = regexp.MustCompile(`^--(?:secure-)?port=(\d{1,5})$`)
)

// loopbackPorts finds the loopback ports a command line names (listen and peer URLs,
// --secure-port): the ports the harness must reach in the namespace.
func loopbackPorts(args []string) []int {
	seen := map[int]bool{}
	var out []int
	add := func(s string) {
		if p, err := strconv.Atoi(s); err == nil && p > 0 && p < 65536 && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, a := range args {
		for _, m := range loopbackPortRe.FindAllStringSubmatch(a, -1) {
			add(m[1])
		}
		if m := securePortRe.FindStringSubmatch(a); m != nil {
			add(m[1])
		}
	}
	return out
}
