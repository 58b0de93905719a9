package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Component names of the real node.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
	KubeProxy  = "kube-proxy"
)

// PauseImage is the sandbox image containerd uses; `make images` writes it to bin/images/pause.tar.
const PauseImage = "registry.k8s.io/pause:3.10.1"

// RealNodePackages is the fix printed when the real node's host tools are missing.
const RealNodePackages = "apt-get install -y containerd runc containernetworking-plugins iptables iproute2"

// ErrRealNodeUnavailable is wrapped by Start's errors about a host that cannot run a real node
// (not root, or a tool missing).
var ErrRealNodeUnavailable = errors.New("real node unavailable")

// RealNodeConfig adds real nodes (containerd, kubelet, kube-proxy, CNI bridge) to the cluster.
// With it the control plane runs inside a network namespace of its own, which is also the first
// node's; every further node has a namespace of its own, linked to the first by a veth into
// NodeLinkBridge and routed, so pods reach each other by IP across nodes. The harness still
// reaches every component at 127.0.0.1:<port>. It needs root.
type RealNodeConfig struct {
	// NodeName of the first node's kubelet; default "berth-real". Node i (from 2) is
	// NodeName-i.
	NodeName string
	// Count of real nodes; default 1, at most MaxRealNodes.
	Count int
	// Labels added to every node (kubelet --node-labels).
	Labels map[string]string
	// ImageDir holds the image tarballs `make images` writes (pause.tar is required); every
	// *.tar in it is imported into every node's containerd. Default: BinDir/images.
	ImageDir string
	// Images, if set, are the tarballs to import instead of every *.tar in ImageDir (pause.tar
	// is always imported, coredns.tar with ClusterDNS).
	Images []string
	// ClusterDNS deploys CoreDNS (kube-system/coredns behind kube-dns at ClusterDNSIP) on the
	// first node once every node is Ready, so pods resolve Service names; it needs coredns.tar
	// in ImageDir.
	ClusterDNS bool
}

// RealNode describes one running real node of a cluster.
type RealNode struct {
	NodeName string
	// Index of the node, from 0 (the node in the cluster's namespace).
	Index int
	// IP is the node's InternalIP (on its pod bridge); Subnet its pod subnet.
	IP, Subnet string
	// NetNS is the bind-mounted network namespace of the node (the first node's is the whole
	// control plane's): `nsenter --net=<NetNS> ip addr` looks inside.
	NetNS string
	// ContainerdSocket for `ctr -a <socket> -n k8s.io ...`.
	ContainerdSocket string
	// CgroupName is the cgroup (in every hierarchy) the node's pods live under.
	CgroupName string
	// Network is the CNI network name (unique per cluster, shared by its nodes).
	Network string
	// NetNSInode identifies the namespace in /proc/<pid>/ns/net.
	NetNSInode uint64

	addr       nodeAddr
	paths      realNodePaths
	ns         *netNS
	tools      map[string]string
	cgroups    []string // created cgroup roots, one per hierarchy
	containerd *Process
	kubelet    *Process
	kubeProxy  *Process
	stopped    bool
}

// realNodes is what the real nodes of a cluster share: the control plane's namespace and its
// forwarder, host state to restore, and the host lock.
type realNodes struct {
	nodes []*RealNode
	fwd   *forwarder
	tools map[string]string
	// sysctls are the kernel tunables found before the first kubelet started.
	sysctls map[string]string
	// createdHostPaths did not exist before the nodes started (see hostPaths).
	createdHostPaths []string
	shimSockets      []string
	// hostLock is held from network creation to the end of teardown (see lockHost).
	hostLock *os.File
}

func (rs *realNodes) cgroups() []string {
	var out []string
	for _, n := range rs.nodes {
		out = append(out, n.cgroups...)
	}
	return out
}

func (rs *realNodes) sockets() []string {
	var out []string
	for _, n := range rs.nodes {
		if n.paths.Socket != "" {
			out = append(out, n.paths.Socket)
		}
	}
	return out
}

// realNodeLockPath serialises real nodes across processes: `go test ./e2e/...` runs suites
// in parallel, and kubelets share host-global paths (the device-plugin socket, container log
// links, kernel settings they change and teardown restores) that one cluster's teardown must
// not take from another's. Why a fixed path under /run (root-only, like a real node) and not
// the temporary directory: suites give every process a private TMPDIR, and a lock two
// processes find in different places serialises nothing.
var realNodeLockPath = "/run/berth-realnode.lock"

// lockHost waits (bounded) until no other real node runs on this machine.
func lockHost(timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(realNodeLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: another real node holds %s: %v", ErrRealNodeUnavailable, realNodeLockPath, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WhileNoRealNode runs f while no real node runs on this machine (holding the real-node lock,
// waiting up to timeout for it), so a test can read host state that a real node changes
// without seeing another run's node half made or half gone.
func WhileNoRealNode(timeout time.Duration, f func()) error {
	l, err := lockHost(timeout)
	if err != nil {
		return err
	}
	defer l.Close() // releases the flock
	f()
	return nil
}

func (c *Cluster) realNodes() *realNodes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real
}

func (c *Cluster) realNode() *RealNode {
	if rs := c.realNodes(); rs != nil && len(rs.nodes) > 0 {
		return rs.nodes[0]
	}
	return nil
}

// RealNode returns the cluster's first real node (the one in the control plane's namespace),
// or nil when it runs none.
func (c *Cluster) RealNode() *RealNode { return c.realNode() }

// RealNodes returns every real node of the cluster, first node first (nil when it runs none).
func (c *Cluster) RealNodes() []*RealNode {
	if rs := c.realNodes(); rs != nil {
		return append([]*RealNode(nil), rs.nodes...)
	}
	return nil
}

// RealNodeNamed returns the real node called name, or nil.
func (c *Cluster) RealNodeNamed(name string) *RealNode {
	for _, n := range c.RealNodes() {
		if n.NodeName == name {
			return n
		}
	}
	return nil
}

// Ctr runs ctr against the real node's containerd, in the namespace the kubelet uses.
func (r *RealNode) Ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, r.tools["ctr"], append([]string{"-a", r.ContainerdSocket, "-n", "k8s.io"}, args...)...)
}

// InNetNS runs a command inside the node's network namespace.
func (r *RealNode) InNetNS(ctx context.Context, name string, args ...string) (string, error) {
	return run(ctx, r.tools["nsenter"], append([]string{"--net=" + r.NetNS, "--", name}, args...)...)
}

// DialContext connects to addr inside the node's network namespace (for pod or node
// addresses, which exist nowhere else; every pod is reachable from every node).
func (r *RealNode) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return r.ns.dial(ctx, network, addr)
}

// ExposeLoopbackPort makes a server the caller runs on the root namespace's 127.0.0.1:port
// reachable at the same address from the cluster's components (the API server calling a
// webhook a test or the demo serves from its own process). Without a real node the cluster
// shares the root namespace's loopback and there is nothing to do. stop ends the relay.
func (c *Cluster) ExposeLoopbackPort(port int) (stop func(), err error) {
	rs := c.realNodes()
	if rs == nil || rs.fwd == nil {
		return func() {}, nil
	}
	if err := rs.fwd.expose(port); err != nil {
		return nil, fmt.Errorf("relaying 127.0.0.1:%d into the cluster's network namespace: %w", port, err)
	}
	return func() { rs.fwd.unrelay(port) }, nil
}

func run(ctx context.Context, bin string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// realNodeTools are the host tools a real node needs, by the name it is looked up with.
var realNodeTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables", "nsenter"}

// cniPlugins are the Debian containernetworking-plugins the node's CNI config uses.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// CNIPluginDir is where Debian's containernetworking-plugins installs the plugins.
var CNIPluginDir = "/usr/lib/cni"

// realNodePreflight checks root, tools, binaries and images before anything starts, and
// points the apiserver at the node's bridge.
func (c *Cluster) realNodePreflight() error {
	rc := c.cfg.RealNode
	if rc == nil {
		return nil
	}
	if c.cfg.Detach {
		return fmt.Errorf("%w: a real node cannot be detached (its namespace forwarder lives in this process)", ErrRealNodeUnavailable)
	}
	cp := *rc
	rc = &cp
	if rc.NodeName == "" {
		rc.NodeName = "berth-real"
	}
	if rc.Count == 0 {
		rc.Count = 1
	}
	if rc.Count < 0 || rc.Count > MaxRealNodes {
		return fmt.Errorf("%w: %d real nodes asked for; between 1 and %d fit", ErrRealNodeUnavailable, rc.Count, MaxRealNodes)
	}
	if !validNodeName(rc.NodeName) || len(rc.NodeName) > 60 {
		return fmt.Errorf("%w: node name %q is not a lowercase DNS name of at most 60 characters", ErrRealNodeUnavailable, rc.NodeName)
	}
	c.cfg.RealNode = rc
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the real node creates a network namespace, mounts and cgroups: run the tests as root)")
	}
	tools := map[string]string{}
	for _, t := range realNodeTools {
		p, err := lookTool(t)
		if err != nil {
			missing = append(missing, t)
			continue
		}
		tools[t] = p
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(CNIPluginDir, p)); err != nil {
			missing = append(missing, "CNI plugin "+filepath.Join(CNIPluginDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s; fix: %s", ErrRealNodeUnavailable, strings.Join(missing, ", "), RealNodePackages)
	}
	for _, b := range []string{Kubelet, KubeProxy} {
		if _, err := os.Stat(filepath.Join(c.BinDir, b)); err != nil {
			return &ComponentError{Component: b, Err: fmt.Errorf("%w at %s: run `make tools`", ErrMissingBinary, filepath.Join(c.BinDir, b))}
		}
	}
	imgs, err := c.realNodeImages()
	if err != nil {
		return err
	}
	_ = imgs
	// The apiserver serves on every address of the namespace (its loopback for the harness
	// and components, the bridge for pods through the kubernetes Service) and advertises the
	// node IP, so the Service gets a real endpoint. Later flags win.
	extra := map[string][]string{}
	for k, v := range c.cfg.ExtraArgs {
		extra[k] = v
	}
	// Logs, exec and port-forward go from the apiserver to the kubelet: by the node's IP,
	// since no DNS here resolves the node's name (upstream tries Hostname first).
	extra[APIServer] = append([]string{"--bind-address=0.0.0.0", "--advertise-address=" + RealNodeIP,
		"--endpoint-reconciler-type=lease", "--kubelet-preferred-address-types=InternalIP,Hostname"}, extra[APIServer]...)
	c.cfg.ExtraArgs = extra
	rs := &realNodes{tools: tools}
	for i := 0; i < rc.Count; i++ {
		a := nodeAddrs(i)
		n := &RealNode{NodeName: realNodeName(rc.NodeName, i), Index: i, IP: a.IP, Subnet: a.Subnet, addr: a, tools: tools}
		rs.nodes = append(rs.nodes, n)
	}
	c.mu.Lock()
	c.real = rs
	c.mu.Unlock()
	return nil
}

// realNodeName names node i (from 0): the first keeps the configured name.
func realNodeName(first string, i int) string {
	if i == 0 {
		return first
	}
	return fmt.Sprintf("%s-%d", first, i+1)
}

// componentName names a node's component process (and its log file): the first node's keep
// the bare names.
func (r *RealNode) componentName(component string) string {
	if r.Index == 0 {
		return component
	}
	return component + "-" + r.NodeName
}

func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	// Under sudo or a minimal PATH, sbin may be missing.
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// realNodeImages lists the tarballs to import, pause first.
func (c *Cluster) realNodeImages() ([]string, error) {
	rc := c.cfg.RealNode
	dir := rc.ImageDir
	if dir == "" {
		dir = filepath.Join(c.BinDir, "images")
	}
	pause := filepath.Join(dir, "pause.tar")
	if _, err := os.Stat(pause); err != nil {
		return nil, fmt.Errorf("%w: no pause image at %s: run `make images`", ErrRealNodeUnavailable, pause)
	}
	dns := filepath.Join(dir, "coredns.tar")
	if _, err := os.Stat(dns); err != nil && rc.ClusterDNS {
		return nil, fmt.Errorf("%w: cluster DNS asked for, but no CoreDNS image at %s: run `make images`", ErrRealNodeUnavailable, dns)
	}
	list := rc.Images
	if len(list) == 0 {
		all, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
		sort.Strings(all)
		list = all
	}
	out := []string{pause}
	if rc.ClusterDNS {
		// Asked for DNS: its image too, whatever the list.
		out = append(out, dns)
	}
	for _, p := range list {
		if filepath.Clean(p) == pause || rc.ClusterDNS && filepath.Clean(p) == dns {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: image %s: %v", ErrRealNodeUnavailable, p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// realNodeIPs are the extra addresses the apiserver's certificate must name: the first node's
// IP, where every other node's kubelet and kube-proxy reach it.
func (c *Cluster) realNodeIPs() []net.IP {
	if c.cfg.RealNode == nil {
		return nil
	}
	return []net.IP{net.ParseIP(RealNodeIP)}
}

// realNodeNetwork creates the nodes' network namespaces: the cluster's (the first node's:
// loopback, its pod bridge with the node IP) and, for every further node, one joined to it by
// a veth into NodeLinkBridge, with a pod bridge of its own and routes to every other node's
// pod subnet. Forwarding is switched on inside the namespaces only.
func (c *Cluster) realNodeNetwork() error {
	rs := c.realNodes()
	if rs == nil {
		return nil
	}
	lock, err := lockHost(10 * time.Minute)
	if err != nil {
		return err
	}
	rs.hostLock = lock
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	rs.createdHostPaths = absentHostPaths()
	for _, n := range rs.nodes {
		if err := c.createNodeNetNS(n, suffix); err != nil {
			return err
		}
	}
	first := rs.nodes[0]
	rs.fwd = newForwarder(first.ns)
	for _, n := range rs.nodes {
		if err := rs.setupPodBridge(n); err != nil {
			return err
		}
	}
	if len(rs.nodes) > 1 {
		if err := rs.linkNodes(); err != nil {
			return err
		}
	}
	for _, n := range rs.nodes {
		if err := n.ns.runIn(func() error {
			// /proc/sys/net is the opening thread's namespace: this only affects the node's.
			return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
		}); err != nil {
			return fmt.Errorf("node %s: switching on forwarding: %w", n.NodeName, err)
		}
	}
	return nil
}

// createNodeNetNS names node n's network, cgroup and paths after the run's suffix and creates
// its network namespace: the cluster's for the first node, one of its own for every other.
func (c *Cluster) createNodeNetNS(n *RealNode, suffix string) error {
	n.Network = "berth-" + suffix
	n.CgroupName = "berth-" + suffix
	nsPath := filepath.Join(c.Dir, "netns", "net")
	n.paths = newRealNodePaths(c.Dir)
	if n.Index > 0 {
		n.CgroupName = fmt.Sprintf("berth-%s-%d", suffix, n.Index+1)
		nsPath = filepath.Join(c.Dir, "netns", n.NodeName)
		// Short: containerd's ttrpc socket path must stay under 104 bytes.
		n.paths = newNodePaths(filepath.Join(c.Dir, fmt.Sprintf("n%d", n.Index+1)))
	}
	// why: every node's socket at <Dir>/cri/<node name>/, so one chart value
	// (CRISocketTemplate) serves them all through a per-pod subPathExpr.
	n.paths.Socket = criSocket(c.Dir, n.NodeName)
	n.ContainerdSocket = n.paths.Socket
	ns, err := createNetNS(nsPath)
	if err != nil {
		return fmt.Errorf("creating the network namespace of node %s: %w", n.NodeName, err)
	}
	n.ns, n.NetNS = ns, ns.Path
	n.NetNSInode, err = ns.Inode()
	return err
}

// ip runs `ip args...` in node n's network namespace.
func (rs *realNodes) ip(n *RealNode, args ...string) error {
	if _, err := n.InNetNS(context.Background(), rs.tools["ip"], args...); err != nil {
		return fmt.Errorf("setting up the network of node %s: %w", n.NodeName, err)
	}
	return nil
}

// ipAll runs `ip` with each of cmds in node n's network namespace, in order.
func (rs *realNodes) ipAll(n *RealNode, cmds ...[]string) error {
	for _, args := range cmds {
		if err := rs.ip(n, args...); err != nil {
			return err
		}
	}
	return nil
}

// setupPodBridge brings node n's loopback up and gives it its pod bridge with the node IP.
func (rs *realNodes) setupPodBridge(n *RealNode) error {
	return rs.ipAll(n,
		[]string{"link", "set", "lo", "up"},
		[]string{"link", "add", RealNodeBridge, "type", "bridge"},
		[]string{"addr", "add", n.IP + "/24", "dev", RealNodeBridge},
		[]string{"link", "set", RealNodeBridge, "up"},
		// The API server and host-network pods dial ClusterIPs (a webhook's Service, the
		// load watcher's): a locally made packet needs a route before kube-proxy's OUTPUT
		// rules can DNAT it to a pod. Without one: "network is unreachable".
		[]string{"route", "add", ServiceCIDR, "dev", RealNodeBridge, "src", n.IP},
	)
}

// linkNodes joins every further node to the cluster's namespace by a veth into
// NodeLinkBridge, and routes every node's pod subnet from every other node.
func (rs *realNodes) linkNodes() error {
	first := rs.nodes[0]
	l := first.addr
	if err := rs.ipAll(first,
		[]string{"link", "add", NodeLinkBridge, "type", "bridge"},
		[]string{"addr", "add", l.LinkIP + "/24", "dev", NodeLinkBridge},
		[]string{"link", "set", NodeLinkBridge, "up"},
	); err != nil {
		return err
	}
	for _, n := range rs.nodes[1:] {
		// The cluster namespace's end is named for the node's index; the node's end,
		// created there and moved into the node's namespace by path, is its uplink.
		host := fmt.Sprintf("vnode%d", n.Index+1)
		if err := rs.ipAll(first,
			[]string{"link", "add", host, "type", "veth", "peer", "name", NodeUplink, "netns", n.NetNS},
			[]string{"link", "set", host, "master", NodeLinkBridge},
			[]string{"link", "set", host, "up"},
		); err != nil {
			return err
		}
		if err := rs.ipAll(n,
			[]string{"addr", "add", n.addr.LinkIP + "/24", "dev", NodeUplink},
			[]string{"link", "set", NodeUplink, "up"},
		); err != nil {
			return err
		}
	}
	// Every node routes every other node's pod subnet to that node's link address.
	for _, n := range rs.nodes {
		for _, m := range rs.nodes {
			if m == n {
				continue
			}
			if err := rs.ip(n, "route", "add", m.Subnet, "via", m.addr.LinkIP, "dev", n.addr.LinkDev); err != nil {
				return err
			}
		}
	}
	return nil
}

// inClusterNetNS rewrites a component's command to run inside the cluster's namespace (through
// nsenter, which joins only the network namespace and then execs the binary, so the pid and
// process group stay the component's) and forwards the loopback ports it names.
func (c *Cluster) inClusterNetNS(spec ProcessSpec) ProcessSpec {
	rs := c.realNodes()
	if rs == nil || rs.fwd == nil {
		return spec
	}
	for _, p := range loopbackPorts(spec.Args) {
		if err := rs.fwd.forward(p); err != nil {
			c.cfg.Logf("not forwarding 127.0.0.1:%d for %s: %v", p, spec.Name, err)
		}
	}
	return inNetNS(spec, rs.tools["nsenter"], rs.nodes[0].NetNS)
}

func inNetNS(spec ProcessSpec, nsenter, netns string) ProcessSpec {
	spec.Args = append([]string{"--net=" + netns, "--", spec.Binary}, spec.Args...)
	spec.Binary = nsenter
	return spec
}

// startInNode runs a component of node r inside r's namespace. The first node's go through
// StartComponent like the control plane; the others' ports stay in their own namespaces.
func (c *Cluster) startInNode(ctx context.Context, r *RealNode, spec ProcessSpec, check func(context.Context) error) (*Process, error) {
	spec.Name = r.componentName(spec.Name)
	if r.Index == 0 {
		return c.StartComponent(ctx, spec, check)
	}
	spec.Args = append(spec.Args, c.cfg.ExtraArgs[spec.Name]...)
	return c.launch(ctx, inNetNS(spec, r.tools["nsenter"], r.NetNS), check)
}

// StartNodeComponent runs a process of the cluster inside real node r's network namespace, as
// a hostNetwork pod of that node would run (a node agent), and waits until check passes. Its
// loopback is the node's own: give it a kubeconfig from WriteNodeKubeconfig.
func (c *Cluster) StartNodeComponent(ctx context.Context, r *RealNode, spec ProcessSpec, check func(context.Context) error) (*Process, error) {
	if r.Index == 0 {
		return c.StartComponent(ctx, spec, check)
	}
	spec.Args = append(spec.Args, c.cfg.ExtraArgs[spec.Name]...)
	return c.launch(ctx, inNetNS(spec, r.tools["nsenter"], r.NetNS), check)
}

// WriteNodeKubeconfig is WriteKubeconfig for a client running in real node r's namespace: the
// API server at the first node's IP for the others (their loopback does not have it).
func (c *Cluster) WriteNodeKubeconfig(r *RealNode, name string, id Identity) (string, error) {
	return c.writeKubeconfig(name, c.nodeServer(r), id)
}

func (c *Cluster) nodeServer(r *RealNode) string {
	if r.Index == 0 {
		return c.Host
	}
	return "https://" + net.JoinHostPort(RealNodeIP, c.Host[strings.LastIndexByte(c.Host, ':')+1:])
}

// HTTPCheck passes when url, fetched from inside the node's namespace, answers 200 (a check
// for StartNodeComponent).
func (r *RealNode) HTTPCheck(url string) func(context.Context) error { return r.nsHTTPCheck(url) }

// nsHTTPCheck is httpCheck over connections made inside the node's namespace.
func (r *RealNode) nsHTTPCheck(url string) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: r.ns.dial, TLSClientConfig: insecureLoopback(), DisableKeepAlives: true}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}

// startRealNodes starts every node: containerd and the image imports on all nodes at once
// (imports dominate), then each node's kubelet and kube-proxy, then waits until every node
// is Ready. A node that fails is named in the error; Start's caller then stops the cluster,
// which tears down every node.
func (c *Cluster) startRealNodes(ctx context.Context) error {
	rs := c.realNodes()
	if rs == nil {
		return nil
	}
	imgs, err := c.realNodeImages()
	if err != nil {
		return err
	}
	errs := make([]error, len(rs.nodes))
	var wg sync.WaitGroup
	for i, n := range rs.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startContainerd(ctx, n, imgs)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, n := range rs.nodes {
		if err := c.realNodeCgroups(n); err != nil {
			return err
		}
	}
	rs.sysctls = readKernelTunables()
	// From here on the nodes have state outside Dir: record it for TeardownKilled.
	c.saveRecord()
	for _, n := range rs.nodes {
		if err := c.startNodeAgents(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range rs.nodes {
		if err := c.waitRealNodeReady(ctx, n); err != nil {
			return err
		}
		if err := c.setRealNodePodCIDR(ctx, n); err != nil {
			return err
		}
	}
	if c.cfg.RealNode.ClusterDNS {
		return c.startClusterDNS(ctx)
	}
	return nil
}

// nodeEnv: containerd and runc live in sbin on Debian; make sure the daemons find them.
func nodeEnv(tools map[string]string) []string {
	return []string{"PATH=" + strings.Join(toolDirs(tools), ":") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// startContainerd writes the node's containerd and CNI configuration, runs containerd and
// imports the images.
func (c *Cluster) startContainerd(ctx context.Context, r *RealNode, imgs []string) error {
	p := r.paths
	for _, d := range []string{p.ContainerdDir, filepath.Dir(p.Socket), p.CNIBin, p.CNIConf, p.CNIData, p.Kubelet, p.PodLogs, p.VolumePlugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, pl := range cniPlugins {
		if err := os.Symlink(filepath.Join(CNIPluginDir, pl), filepath.Join(p.CNIBin, pl)); err != nil {
			return err
		}
	}
	conf, err := cniConfig(r.Network, p, r.addr)
	if err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(p.ContainerdDir, "config.toml"): containerdConfig(p, PauseImage),
		filepath.Join(p.CNIConf, "10-berth.conflist"): conf,
		p.ResolvConf: resolvConf(r.addr),
		filepath.Join(p.Root, "kubelet-config.yaml"): kubeletConfig(p, r.addr, c.PKI.CACert, "/"+r.CgroupName),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	r.containerd, err = c.startInNode(ctx, r, ProcessSpec{Name: Containerd, Binary: r.tools["containerd"],
		Args: []string{"--config", filepath.Join(p.ContainerdDir, "config.toml"), "--log-level", "warn"}, Env: nodeEnv(r.tools)},
		func(ctx context.Context) error {
			_, err := run(ctx, r.tools["ctr"], "-a", p.Socket, "version")
			return err
		})
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if _, err := r.Ctr(ctx, "images", "import", img); err != nil {
			return &ComponentError{Component: r.componentName(Containerd), Err: fmt.Errorf("node %s: importing %s: %w", r.NodeName, img, err)}
		}
	}
	return nil
}

// startNodeAgents runs the node's kubelet and kube-proxy. The first node's talk to the API
// server on the namespace's loopback like the control plane; the others at the first node's
// IP (which the serving certificate names).
func (c *Cluster) startNodeAgents(ctx context.Context, r *RealNode) error {
	p := r.paths
	server := c.nodeServer(r)
	if err := makeRShared(p.Kubelet); err != nil {
		return err
	}
	kubeletKC, err := c.writeKubeconfig(r.componentName(Kubelet), server, Identity{User: "system:node:" + r.NodeName, Groups: []string{"system:nodes"}})
	if err != nil {
		return err
	}
	args := []string{
		"--config=" + filepath.Join(p.Root, "kubelet-config.yaml"), "--kubeconfig=" + kubeletKC,
		"--root-dir=" + p.Kubelet, "--cert-dir=" + filepath.Join(p.Kubelet, "pki"), "--hostname-override=" + r.NodeName, "--node-ip=" + r.IP, "--v=2",
	}
	if lbl := labelArg(c.cfg.RealNode.Labels); lbl != "" {
		args = append(args, "--node-labels="+lbl)
	}
	if r.kubelet, err = c.startInNode(ctx, r, ProcessSpec{Name: Kubelet, Binary: filepath.Join(c.BinDir, Kubelet), Args: args, Env: nodeEnv(r.tools)},
		r.nsHTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthz))); err != nil {
		return err
	}
	proxyKC, err := c.writeKubeconfig(r.componentName(KubeProxy), server, Identity{User: "system:kube-proxy"})
	if err != nil {
		return err
	}
	proxyConf := filepath.Join(p.Root, "kube-proxy-config.yaml")
	if err := os.WriteFile(proxyConf, []byte(kubeProxyConfig(proxyKC, r.NodeName, r.addr)), 0o644); err != nil {
		return err
	}
	if r.kubeProxy, err = c.startInNode(ctx, r, ProcessSpec{Name: KubeProxy, Binary: filepath.Join(c.BinDir, KubeProxy),
		Args: []string{"--config=" + proxyConf, "--v=2"}, Env: nodeEnv(r.tools)},
		r.nsHTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/healthz", proxyHealthz))); err != nil {
		return err
	}
	return nil
}

func toolDirs(tools map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range realNodeTools {
		if d := filepath.Dir(tools[t]); tools[t] != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

func labelArg(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// setRealNodePodCIDR writes the node's pod subnet (what its CNI configuration hands out) into
// spec.podCIDR, as a controller-manager allocating node CIDRs would, so the pod ranges can be
// discovered from the nodes. Not the controller-manager's --allocate-node-cidrs: it would
// allocate in registration order, not each node's subnet, and from KWOK's range too.
func (c *Cluster) setRealNodePodCIDR(ctx context.Context, r *RealNode) error {
	if c.cfg.WithoutPodCIDRs {
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, r.Subnet, r.Subnet)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, r.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return &ComponentError{Component: r.componentName(Kubelet), Err: fmt.Errorf("setting node %s's spec.podCIDR to %s: %w", r.NodeName, r.Subnet, err)}
	}
	return nil
}

func (c *Cluster) waitRealNodeReady(ctx context.Context, r *RealNode) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.cfg.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, r.NodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition"
		return false, nil
	})
	if err != nil {
		return &ComponentError{Component: r.componentName(Kubelet), Err: fmt.Errorf("node %s not Ready after %s (%s)", r.NodeName, c.cfg.ReadyTimeout, last),
			LogPath: r.kubelet.LogPath, LogTail: r.kubelet.Tail(30)}
	}
	return nil
}

// makeRShared makes dir a mount point with shared propagation, as the kubelet wants its root
// dir. Left to itself the kubelet bind-mounts the dir onto itself at start while its pods-API
// and pod-resources servers are already creating their sockets there (write a temporary file,
// rename it): a rename that straddles the new mount fails with EXDEV and the kubelet exits
// ("invalid cross-device link"; k3s-io/k3s#4042 reports the same race). Done here first, the
// kubelet finds the mount in place and leaves it; teardown unmounts everything under Dir.
func makeRShared(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting the kubelet root %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making the kubelet root %s a shared mount: %w", dir, err)
	}
	return nil
}
