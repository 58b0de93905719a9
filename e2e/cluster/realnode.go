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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// RealNodeConfig adds one real node (containerd, kubelet, kube-proxy, CNI bridge) to the
// cluster. With it the whole cluster runs inside a network namespace of its own; the harness
// still reaches every component at 127.0.0.1:<port>. It needs root.
type RealNodeConfig struct {
	// NodeName of the kubelet's node; default "berth-real".
	NodeName string
	// Labels added to the node (kubelet --node-labels).
	Labels map[string]string
	// ImageDir holds the image tarballs `make images` writes (pause.tar is required); every
	// *.tar in it is imported into containerd. Default: BinDir/images.
	ImageDir string
	// Images, if set, are the tarballs to import instead of every *.tar in ImageDir (pause.tar
	// is always imported).
	Images []string
	// ClusterDNS deploys CoreDNS (kube-system/coredns behind kube-dns at ClusterDNSIP) once
	// the node is Ready, so pods resolve Service names; it needs coredns.tar in ImageDir.
	ClusterDNS bool
}

// RealNode describes the running real node of a cluster.
type RealNode struct {
	NodeName string
	// NetNS is the bind-mounted network namespace of the whole cluster:
	// `nsenter --net=<NetNS> ip addr` looks inside.
	NetNS string
	// ContainerdSocket for `ctr -a <socket> -n k8s.io ...`.
	ContainerdSocket string
	// CgroupName is the cgroup (in every hierarchy) the node's pods live under.
	CgroupName string
	// Network is the CNI network name (unique per cluster).
	Network string
	// NetNSInode identifies the namespace in /proc/<pid>/ns/net.
	NetNSInode uint64

	paths     realNodePaths
	ns        *netNS
	fwd       *forwarder
	tools     map[string]string
	cgroups   []string // created cgroup roots, one per hierarchy
	sysctls   map[string]string
	kubelet   *Process
	kubeProxy *Process
	// createdHostPaths did not exist before the node started (see hostPaths).
	createdHostPaths []string
	shimSockets      []string
	// hostLock is held from network creation to the end of teardown (see lockHost).
	hostLock *os.File
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

func (c *Cluster) realNode() *RealNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// RealNode returns the cluster's real node, or nil when it runs none.
func (c *Cluster) RealNode() *RealNode { return c.realNode() }

// Ctr runs ctr against the real node's containerd, in the namespace the kubelet uses.
func (r *RealNode) Ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, r.tools["ctr"], append([]string{"-a", r.ContainerdSocket, "-n", "k8s.io"}, args...)...)
}

// InNetNS runs a command inside the cluster's network namespace.
func (r *RealNode) InNetNS(ctx context.Context, name string, args ...string) (string, error) {
	return run(ctx, r.tools["nsenter"], append([]string{"--net=" + r.NetNS, "--", name}, args...)...)
}

// DialContext connects to addr inside the cluster's network namespace (for pod or node
// addresses, which exist nowhere else).
func (r *RealNode) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return r.ns.dial(ctx, network, addr)
}

// ExposeLoopbackPort makes a server the caller runs on the root namespace's 127.0.0.1:port
// reachable at the same address from the cluster's components (the API server calling a
// webhook a test or the demo serves from its own process). Without a real node the cluster
// shares the root namespace's loopback and there is nothing to do. stop ends the relay.
func (c *Cluster) ExposeLoopbackPort(port int) (stop func(), err error) {
	r := c.realNode()
	if r == nil || r.fwd == nil {
		return func() {}, nil
	}
	if err := r.fwd.expose(port); err != nil {
		return nil, fmt.Errorf("relaying 127.0.0.1:%d into the cluster's network namespace: %w", port, err)
	}
	return func() { r.fwd.unrelay(port) }, nil
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
	if rc.NodeName == "" {
		rc = &RealNodeConfig{NodeName: "berth-real", Labels: rc.Labels, ImageDir: rc.ImageDir, Images: rc.Images, ClusterDNS: rc.ClusterDNS}
	}
	if !validNodeName(rc.NodeName) {
		return fmt.Errorf("%w: node name %q is not a lowercase DNS name", ErrRealNodeUnavailable, rc.NodeName)
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
	c.mu.Lock()
	c.node = &RealNode{NodeName: rc.NodeName, tools: tools}
	c.mu.Unlock()
	return nil
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
	for _, p := range list {
		if filepath.Clean(p) == pause {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: image %s: %v", ErrRealNodeUnavailable, p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// realNodeIPs are the extra addresses the apiserver's certificate must name.
func (c *Cluster) realNodeIPs() []net.IP {
	if c.cfg.RealNode == nil {
		return nil
	}
	return []net.IP{net.ParseIP(RealNodeIP)}
}

// realNodeNetwork creates the cluster's network namespace: loopback, the bridge with the
// node IP, and forwarding switched on inside it only (ClusterIP traffic between pods).
func (c *Cluster) realNodeNetwork() error {
	r := c.realNode()
	if r == nil {
		return nil
	}
	lock, err := lockHost(10 * time.Minute)
	if err != nil {
		return err
	}
	r.hostLock = lock
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	r.CgroupName = "berth-" + suffix
	r.Network = "berth-" + suffix
	r.paths = newRealNodePaths(c.Dir)
	r.ContainerdSocket = r.paths.Socket
	r.createdHostPaths = absentHostPaths()
	ns, err := createNetNS(filepath.Join(c.Dir, "netns", "net"))
	if err != nil {
		return fmt.Errorf("creating the cluster's network namespace: %w", err)
	}
	r.ns, r.NetNS = ns, ns.Path
	r.fwd = newForwarder(ns)
	if r.NetNSInode, err = ns.Inode(); err != nil {
		return err
	}
	ctx := context.Background()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", RealNodeBridge, "type", "bridge"},
		{"addr", "add", RealNodeIP + "/24", "dev", RealNodeBridge},
		{"link", "set", RealNodeBridge, "up"},
		// The API server and host-network pods dial ClusterIPs (a webhook's Service, the load
		// watcher's): a locally made packet needs a route before kube-proxy's OUTPUT rules can
		// DNAT it to a pod. Without one: "network is unreachable".
		{"route", "add", ServiceCIDR, "dev", RealNodeBridge, "src", RealNodeIP},
	} {
		if _, err := r.InNetNS(ctx, r.tools["ip"], args...); err != nil {
			return fmt.Errorf("setting up the cluster's network: %w", err)
		}
	}
	return ns.runIn(func() error {
		// /proc/sys/net is the opening thread's namespace: this only affects the cluster's.
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
}

// inClusterNetNS rewrites a component's command to run inside the cluster's namespace (through
// nsenter, which joins only the network namespace and then execs the binary, so the pid and
// process group stay the component's) and forwards the loopback ports it names.
func (c *Cluster) inClusterNetNS(spec ProcessSpec) ProcessSpec {
	r := c.realNode()
	if r == nil || r.ns == nil {
		return spec
	}
	for _, p := range loopbackPorts(spec.Args) {
		if err := r.fwd.forward(p); err != nil {
			c.cfg.Logf("not forwarding 127.0.0.1:%d for %s: %v", p, spec.Name, err)
		}
	}
	spec.Args = append([]string{"--net=" + r.NetNS, "--", spec.Binary}, spec.Args...)
	spec.Binary = r.tools["nsenter"]
	return spec
}

// nsHTTPCheck is httpCheck over connections made inside the namespace.
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

// startRealNode runs containerd, imports the images, writes the CNI config and runs the
// kubelet and kube-proxy, then waits for the node to be Ready.
func (c *Cluster) startRealNode(ctx context.Context) error {
	r := c.realNode()
	if r == nil {
		return nil
	}
	p := r.paths
	for _, d := range []string{p.ContainerdDir, p.CNIBin, p.CNIConf, p.CNIData, p.Kubelet, p.PodLogs, p.VolumePlugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, pl := range cniPlugins {
		if err := os.Symlink(filepath.Join(CNIPluginDir, pl), filepath.Join(p.CNIBin, pl)); err != nil {
			return err
		}
	}
	conf, err := cniConfig(r.Network, p)
	if err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(p.ContainerdDir, "config.toml"): containerdConfig(p, PauseImage),
		filepath.Join(p.CNIConf, "10-berth.conflist"): conf,
		p.ResolvConf: resolvConf(),
		filepath.Join(p.Root, "kubelet-config.yaml"): kubeletConfig(p, c.PKI.CACert, "/"+r.CgroupName),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	// containerd and runc live in sbin on Debian; make sure the daemons find them.
	env := []string{"PATH=" + strings.Join(toolDirs(r.tools), ":") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	_, err = c.StartComponent(ctx, ProcessSpec{Name: Containerd, Binary: r.tools["containerd"],
		Args: []string{"--config", filepath.Join(p.ContainerdDir, "config.toml"), "--log-level", "warn"}, Env: env},
		func(ctx context.Context) error {
			_, err := run(ctx, r.tools["ctr"], "-a", p.Socket, "version")
			return err
		})
	if err != nil {
		return err
	}
	imgs, err := c.realNodeImages()
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if _, err := r.Ctr(ctx, "images", "import", img); err != nil {
			return &ComponentError{Component: Containerd, Err: fmt.Errorf("importing %s: %w", img, err)}
		}
	}
	if err := c.realNodeCgroups(); err != nil {
		return err
	}
	r.sysctls = readKernelTunables()
	// From here on the node has state outside Dir: record it for TeardownKilled.
	c.saveRecord()

	if err := makeRShared(p.Kubelet); err != nil {
		return err
	}
	kubeletKC, err := c.WriteKubeconfig(Kubelet, Identity{User: "system:node:" + r.NodeName, Groups: []string{"system:nodes"}})
	if err != nil {
		return err
	}
	args := []string{
		"--config=" + filepath.Join(p.Root, "kubelet-config.yaml"), "--kubeconfig=" + kubeletKC,
		"--root-dir=" + p.Kubelet, "--cert-dir=" + filepath.Join(p.Kubelet, "pki"), "--hostname-override=" + r.NodeName, "--node-ip=" + RealNodeIP, "--v=2",
	}
	if lbl := labelArg(c.cfg.RealNode.Labels); lbl != "" {
		args = append(args, "--node-labels="+lbl)
	}
	if r.kubelet, err = c.StartComponent(ctx, ProcessSpec{Name: Kubelet, Binary: filepath.Join(c.BinDir, Kubelet), Args: args, Env: env},
		r.nsHTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthz))); err != nil {
		return err
	}
	proxyKC, err := c.WriteKubeconfig(KubeProxy, Identity{User: "system:kube-proxy"})
	if err != nil {
		return err
	}
	proxyConf := filepath.Join(p.Root, "kube-proxy-config.yaml")
	if err := os.WriteFile(proxyConf, []byte(kubeProxyConfig(proxyKC, r.NodeName)), 0o644); err != nil {
		return err
	}
	if r.kubeProxy, err = c.StartComponent(ctx, ProcessSpec{Name: KubeProxy, Binary: filepath.Join(c.BinDir, KubeProxy),
		Args: []string{"--config=" + proxyConf, "--v=2"}, Env: env},
		r.nsHTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/healthz", proxyHealthz))); err != nil {
		return err
	}
	if err := c.waitRealNodeReady(ctx); err != nil {
		return err
	}
	if c.cfg.RealNode.ClusterDNS {
		return c.startClusterDNS(ctx)
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

func (c *Cluster) waitRealNodeReady(ctx context.Context) error {
	r := c.realNode()
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
		return &ComponentError{Component: Kubelet, Err: fmt.Errorf("node %s not Ready after %s (%s)", r.NodeName, c.cfg.ReadyTimeout, last),
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
