// Package cluster runs a local Kubernetes cluster built from source: etcd, kube-apiserver,
// kube-controller-manager, the stock kube-scheduler and KWOK as processes on loopback, with a
// generated PKI and kubeconfigs. It backs `make demo`, `make up`, the end-to-end suites and the
// benchmarks.
//
// Every address is on 127.0.0.1 and every port is chosen at run time, so clusters can run side
// by side. A node backend (KWOK now; a real kubelet later) plugs in through the Node* helpers.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	berthcrds "github.com/berth-sched/berth/api/crds"
	spocrds "github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/crds"
)

// Component names, as they appear in errors, log files and pid files.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	DefaultScheduler  = "kube-scheduler"
	KWOK              = "kwok"
	BerthScheduler    = "berth-scheduler"
)

// Config chooses what the cluster runs. The zero value (plus Dir) runs the full control plane.
type Config struct {
	// Dir holds PKI, kubeconfigs, data and logs. Empty: a new temporary directory that Stop removes.
	Dir string
	// BinDir holds the tool binaries; default $BERTH_BIN_DIR, else bin/ at the repository root.
	BinDir string
	// Without* leave a component out (the benchmarks run their schedulers on bare API objects).
	WithoutControllerManager bool
	WithoutDefaultScheduler  bool
	WithoutKWOK              bool
	// WithoutPodCIDRs leaves spec.podCIDR unset on every node, as on a cluster whose pod
	// network allocates no node ranges (what the PodConfig operator must then refuse to guess).
	// By default each real node's is its pod subnet 10.244.<i>.0/24 and every simulated node's
	// is SimulatedPodCIDR, so the pod ranges can be discovered from the nodes.
	WithoutPodCIDRs bool
	// WithoutBerthCRDs skips installing the CRDs Berth reads but does not own (SPO's
	// SeccompProfile and ProfileBinding, where SPO is absent) and the InstanceClass CRD the
	// chart's admission policies name as their paramKind.
	WithoutBerthCRDs bool
	// APIServerPort fixes kube-apiserver's port; 0 picks a free one.
	APIServerPort int
	// ExtraArgs are appended to a component's command line, by component name.
	ExtraArgs map[string][]string
	// ReadyTimeout bounds the wait for each component (default 60s).
	ReadyTimeout time.Duration
	// Detach leaves the processes running after this program exits (make up); stop them with Down.
	Detach bool
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
	// OnProcess is called for every process the cluster starts (tests use it to check that
	// nothing outlives a failed start). Calls never overlap, though real nodes start in parallel.
	OnProcess func(*Process)
	// RealNode adds a real node (containerd, kubelet, kube-proxy) and runs the whole cluster
	// in a network namespace of its own (see realnode.go). Needs root.
	RealNode *RealNodeConfig
}

// Cluster is a running local cluster.
type Cluster struct {
	cfg     Config
	Dir     string
	BinDir  string
	PKI     *PKI
	Host    string // https://127.0.0.1:port
	EtcdURL string
	// Kubeconfig is the admin kubeconfig (system:masters).
	Kubeconfig string
	RESTConfig *rest.Config
	Client     kubernetes.Interface

	mu       sync.Mutex
	hookMu   sync.Mutex // serialises cfg.OnProcess
	procs    []*Process
	ownsDir  bool
	stopped  bool
	KWOKAddr string
	// real is the real nodes' state when Config.RealNode is set.
	real *realNodes
	// onStop run after the processes stop and before the directory is removed (OnStop).
	onStop []func()
	// karpenter is the autoscaler StartKarpenter runs (nil: none).
	karpenter *karpenterState
}

// Start brings the cluster up and waits until every component is ready. On failure it stops
// whatever it started and returns an error naming the component, with the tail of its log.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Cluster{cfg: cfg, Dir: cfg.Dir}
	if c.BinDir, err = ResolveBinDir(cfg.BinDir); err != nil {
		return nil, err
	}
	// Check every binary before starting anything, so a missing one leaves nothing behind.
	for _, name := range c.components() {
		if _, err := os.Stat(filepath.Join(c.BinDir, name)); err != nil {
			return nil, &ComponentError{Component: name,
				Err: fmt.Errorf("%w at %s: run `make tools` to build the local cluster's binaries", ErrMissingBinary, filepath.Join(c.BinDir, name))}
		}
	}
	if cfg.APIServerPort != 0 {
		if err := checkPortFree(APIServer, cfg.APIServerPort); err != nil {
			return nil, err
		}
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "berth-cluster-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.realNodePreflight(); err != nil {
		return nil, err
	}
	if err := c.realNodeNetwork(); err != nil {
		return nil, err
	}

	if c.PKI, err = NewPKI(filepath.Join(c.Dir, "pki"), append([]net.IP{net.ParseIP("10.96.0.1")}, c.realNodeIPs()...), nil); err != nil {
		return nil, fmt.Errorf("generating certificates: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if !cfg.WithoutBerthCRDs {
		if err := c.installCRDs(ctx); err != nil {
			return nil, err
		}
	}
	if !cfg.WithoutControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	if !cfg.WithoutDefaultScheduler {
		if err := c.startDefaultScheduler(ctx); err != nil {
			return nil, err
		}
	}
	if !cfg.WithoutKWOK {
		if err := c.startKWOK(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.startRealNodes(ctx); err != nil {
		return nil, err
	}
	cfg.Logf("cluster ready at %s (kubeconfig %s)", c.Host, c.Kubeconfig)
	return c, nil
}

func (c *Cluster) components() []string {
	names := []string{Etcd, APIServer}
	if !c.cfg.WithoutControllerManager {
		names = append(names, ControllerManager)
	}
	if !c.cfg.WithoutDefaultScheduler {
		names = append(names, DefaultScheduler)
	}
	if !c.cfg.WithoutKWOK {
		names = append(names, KWOK)
	}
	return names
}

// RepoRoot is the Berth repository's root: the first directory holding go.work at or above
// the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("run from the Berth repository (no go.work above %s)", wd)
		}
	}
}

// ResolveBinDir finds the directory of tool binaries: explicit, $BERTH_BIN_DIR, or bin/ at the
// repository root.
func ResolveBinDir(explicit string) (string, error) {
	if explicit != "" {
		return filepath.Abs(explicit)
	}
	if d := os.Getenv("BERTH_BIN_DIR"); d != "" {
		return filepath.Abs(d)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("cannot find bin/: set BERTH_BIN_DIR or %w (then `make tools`)", err)
	}
	return filepath.Join(root, "bin"), nil
}

func (c *Cluster) logDir() string { return filepath.Join(c.Dir, "logs") }

// start launches a component and waits for check; on failure the error names it.
func (c *Cluster) start(ctx context.Context, name string, args []string, check func(context.Context) error) (*Process, error) {
	return c.StartComponent(ctx, ProcessSpec{Name: name, Binary: filepath.Join(c.BinDir, name), Args: args}, check)
}

// StartComponent runs a process that belongs to the cluster (Stop ends it) and waits until
// check passes. Berth's own binaries are started through it by the suites.
func (c *Cluster) StartComponent(ctx context.Context, spec ProcessSpec, check func(context.Context) error) (*Process, error) {
	spec.Args = append(spec.Args, c.cfg.ExtraArgs[spec.Name]...)
	return c.launch(ctx, c.inClusterNetNS(spec), check)
}

// launch starts a process of the cluster as given (StartComponent without the extra arguments
// and namespace) and waits until check passes.
func (c *Cluster) launch(ctx context.Context, spec ProcessSpec, check func(context.Context) error) (*Process, error) {
	spec.Detach = c.cfg.Detach
	c.cfg.Logf("starting %s", spec.Name)
	p, err := StartProcess(spec, c.logDir())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	if c.cfg.OnProcess != nil {
		// why: real nodes start their processes from parallel goroutines; serialising the hook
		// spares every caller its own lock (a test that forgot one raced).
		c.hookMu.Lock()
		c.cfg.OnProcess(p)
		c.hookMu.Unlock()
	}
	if check == nil {
		return p, nil
	}
	if err := p.WaitReady(ctx, c.cfg.ReadyTimeout, check); err != nil {
		return nil, err
	}
	return p, nil
}

// StopComponent stops one process the cluster started (e.g. to kill a Berth binary mid-test).
func (c *Cluster) StopComponent(p *Process) {
	p.Stop(stopGrace)
	c.forget(p)
}

// killComponent is StopComponent with SIGKILL at once.
func (c *Cluster) killComponent(p *Process) {
	p.Kill()
	c.forget(p)
}

// forget drops a stopped process from the ones Stop ends.
func (c *Cluster) forget(p *Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
}

// Processes returns the component processes still managed by the cluster.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Process(nil), c.procs...)
}

// stopGrace is how long a component gets after each SIGTERM: kube-apiserver exits at once on
// the second, and the others well within it.
const stopGrace = 2 * time.Second

// Stop ends every process in reverse start order and removes a temporary Dir. It is safe to
// call more than once.
func (c *Cluster) Stop() {
	// First, while the API server and KWOK run: Karpenter deletes the nodes it made.
	c.karpenterBeforeStop()
	c.realNodeBeforeStop()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(stopGrace)
	}
	if err := c.realNodeTeardown(); err != nil {
		c.cfg.Logf("real node teardown: %v", err)
	}
	c.runOnStop()
	if c.ownsDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			c.cfg.Logf("removing %s: %v", c.Dir, err)
		}
	}
}

// Down stops a detached cluster started earlier in dir, by the pid files it left.
func Down(dir string) error {
	pids, _ := filepath.Glob(filepath.Join(dir, "logs", "*.pid"))
	// Reverse start order: clients first, etcd last.
	order := map[string]int{Etcd: 0, APIServer: 1}
	rank := func(p string) int {
		if r, ok := order[strings.TrimSuffix(filepath.Base(p), ".pid")]; ok {
			return r
		}
		return 2
	}
	var errs []error
	for _, r := range []int{2, 1, 0} {
		for _, p := range pids {
			if rank(p) == r {
				if err := StopPIDFile(p, stopGrace); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=berth", "--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + c.EtcdURL, "--advertise-client-urls=" + c.EtcdURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=berth=" + peer,
		// A throwaway cluster: durability buys nothing and fsync dominates on shared disks.
		"--unsafe-no-fsync", "--log-level=warn",
	}
	_, err = c.start(ctx, Etcd, args, httpCheck(nil, c.EtcdURL+"/health"))
	return err
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	port := c.cfg.APIServerPort
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return err
		}
	}
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	kubeletCert, kubeletKey, err := c.PKI.ClientCert(KubeletClientIdentity)
	if err != nil {
		return err
	}
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		// The advertise address is loopback, which Endpoints reject; nothing in the cluster
		// reaches the apiserver through the kubernetes Service without a real node.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.PKI.ServingCert, "--tls-private-key-file=" + c.PKI.ServingKey,
		"--client-ca-file=" + c.PKI.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.PKI.SAPub, "--service-account-signing-key-file=" + c.PKI.SAKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + kubeletCert, "--kubelet-client-key=" + kubeletKey,
		"--profiling=false",
	}
	admin, err := c.WriteKubeconfig("admin", AdminIdentity)
	if err != nil {
		return err
	}
	c.Kubeconfig = admin
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", admin); err != nil {
		return err
	}
	c.RESTConfig.QPS, c.RESTConfig.Burst = 500, 1000
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return err
	}
	_, err = c.start(ctx, APIServer, args, func(ctx context.Context) error {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("/readyz: %v %s", err, body)
		}
		return nil
	})
	return err
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	return c.startSecureComponent(ctx, ControllerManager, ControllerManagerIdentity,
		"--service-account-private-key-file="+c.PKI.SAKey,
		// Without it kube-root-ca.crt has no CA and every projected token volume breaks.
		"--root-ca-file="+c.PKI.CACert,
		"--use-service-account-credentials=true",
		"--cluster-cidr=10.244.0.0/16", "--service-cluster-ip-range="+ServiceCIDR,
		"--controllers=*")
}

func (c *Cluster) startDefaultScheduler(ctx context.Context) error {
	return c.startSecureComponent(ctx, DefaultScheduler, SchedulerIdentity)
}

// startSecureComponent runs a control-plane component that talks to the apiserver as id and
// serves its health on a loopback secure port (kube-controller-manager, kube-scheduler).
func (c *Cluster) startSecureComponent(ctx context.Context, name string, id Identity, extra ...string) error {
	kc, err := c.WriteKubeconfig(name, id)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--leader-elect=false",
	}, extra...)
	_, err = c.start(ctx, name, args, httpCheck(insecureLoopback(), fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
	return err
}

func (c *Cluster) startKWOK(ctx context.Context) error {
	kc, err := c.WriteKubeconfig(KWOK, KWOKIdentity)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.KWOKAddr = fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{
		"--kubeconfig=" + kc,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation + "=fake",
		"--server-address=" + c.KWOKAddr,
		// Simulated nodes and pods get loopback addresses: nothing may route to them.
		"--node-ip=127.0.0.1",
		"--cidr=" + SimulatedPodCIDR,
		// KWOK reads ~/.kwok/kwok.yaml by default; a user's file must not change our cluster.
		"--config=" + filepath.Join(c.Dir, "kwok.yaml"),
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "kwok.yaml"), nil, 0o644); err != nil {
		return err
	}
	_, err = c.start(ctx, KWOK, args, httpCheck(nil, "http://"+c.KWOKAddr+"/healthz"))
	return err
}

// WriteKubeconfig writes a kubeconfig for id (issuing its client certificate) and returns its path.
func (c *Cluster) WriteKubeconfig(name string, id Identity) (string, error) {
	return c.writeKubeconfig(name, c.Host, id)
}

// writeKubeconfig is WriteKubeconfig for a client that reaches the apiserver at server.
func (c *Cluster) writeKubeconfig(name, server string, id Identity) (string, error) {
	cert, key, err := c.PKI.ClientCert(id)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.PKI.CACert}
	cfg.AuthInfos[id.User] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["berth-local"] = &clientcmdapi.Context{Cluster: "berth-local", AuthInfo: id.User}
	cfg.CurrentContext = "berth-local"
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func insecureLoopback() *tls.Config {
	// Health probes of components serving self-signed loopback certificates; nothing but
	// liveness is read over these connections.
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec
}

// httpCheck passes when url answers 200.
func httpCheck(tlsCfg *tls.Config, url string) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}

// HTTPCheck is httpCheck for callers outside the package (Berth binaries' health endpoints).
func HTTPCheck(url string) func(context.Context) error {
	if strings.HasPrefix(url, "https://") {
		return httpCheck(insecureLoopback(), url)
	}
	return httpCheck(nil, url)
}

// installCRDs installs the Security Profiles Operator CRDs that SySched reads (only where
// absent, as the chart does) and waits until the API serves them.
func (c *Cluster) installCRDs(ctx context.Context) error {
	ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	names, err := spocrds.InstallIfAbsent(ctx, ext)
	if err != nil {
		return &ComponentError{Component: APIServer, Err: fmt.Errorf("installing SPO CRDs: %w", err)}
	}
	// why: the chart's class-grant admission policy names InstanceClass as its paramKind; on a
	// cluster without the CRD the API server applies the policy's failurePolicy (Fail) to every
	// classed pod. helm install always brings it (crds/); suites applying the chart's policies
	// get it here.
	ic, err := berthcrds.Load("berth.dev_instanceclasses.yaml")
	if err != nil {
		return &ComponentError{Component: APIServer, Err: err}
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, ic, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return &ComponentError{Component: APIServer, Err: fmt.Errorf("installing the InstanceClass CRD: %w", err)}
	}
	names = append(names, ic.Name)
	for _, name := range names {
		if err := WaitCRDEstablished(ctx, ext, name, c.cfg.ReadyTimeout); err != nil {
			return &ComponentError{Component: APIServer, Err: err}
		}
	}
	return nil
}
