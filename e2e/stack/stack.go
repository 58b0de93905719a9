// Package stack starts Berth's real-load pipeline on a local cluster: the agent's service
// account and RBAC, one fake agent pod per simulated node (KWOK runs it), a pod-bound token per
// agent minted with the TokenRequest API, one berth-agent process per node reading a fixture
// /proc, and berth-loadwatcher with a least-privilege client-certificate identity. The
// end-to-end suites, the demo and the benches share it.
package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// Defaults: the agent account the load watcher allows unless told otherwise.
const (
	AgentNamespace      = "berth-system"
	AgentServiceAccount = "berth-agent"
	// WatcherUser is the load watcher's client-certificate identity.
	WatcherUser = "berth-loadwatcher"
	// AgentRole names the agent's and the watcher's RBAC objects.
	agentRole   = "berth-agent"
	watcherRole = "berth-loadwatcher"
)

// NodeLoad is a simulated node and the load its fixture /proc shows.
type NodeLoad struct {
	Name   string
	CPU    float64 // percent
	Memory float64 // percent
}

// EnsureAgentIdentity creates the agent namespace and service account and lets the account
// list/watch pods (the agent's informer of its node's pods, through its own token).
func EnsureAgentIdentity(ctx context.Context, c *cluster.Cluster, ns, sa string) error {
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		return err
	}
	if err := ensureServiceAccount(ctx, c, ns, sa); err != nil {
		return err
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: agentRole},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agentRole + "-" + ns + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: agentRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func ensureServiceAccount(ctx context.Context, c *cluster.Cluster, ns, sa string) error {
	_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// EnsureServiceAccount creates a service account (e.g. one the watcher must refuse).
func EnsureServiceAccount(ctx context.Context, c *cluster.Cluster, ns, sa string) error {
	return ensureServiceAccount(ctx, c, ns, sa)
}

// WatcherKubeconfig issues the load watcher's client certificate and grants it exactly what it
// uses: create tokenreviews and read nodes cluster-wide, read pods only in the agent namespace
// (its pod informer is namespaced and filtered to the agent account).
func WatcherKubeconfig(ctx context.Context, c *cluster.Cluster, name, agentNS string) (string, error) {
	if err := framework.EnsureNamespace(ctx, c.Client, agentNS); err != nil {
		return "", err
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: watcherRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			// Readers of /watcher: may this user get nodeloads.berth.dev?
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: watcherRole},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: watcherRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: WatcherUser}}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: watcherRole, Namespace: agentNS},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: watcherRole, Namespace: agentNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: watcherRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: WatcherUser}}}
	rbac := c.Client.RbacV1()
	for _, create := range []func() error{
		func() error { _, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); return err },
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		},
		func() error { _, err := rbac.Roles(agentNS).Create(ctx, role, metav1.CreateOptions{}); return err },
		func() error { _, err := rbac.RoleBindings(agentNS).Create(ctx, rb, metav1.CreateOptions{}); return err },
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("load watcher RBAC: %w", err)
		}
	}
	return c.WriteKubeconfig(name, cluster.Identity{User: WatcherUser})
}

// AgentPod creates the (fake) agent pod of a node, bound directly to it as a DaemonSet's pod
// would be, and waits until KWOK reports it Running.
func AgentPod(ctx context.Context, c *cluster.Cluster, ns, sa, name, node string, mutate ...func(*corev1.Pod)) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "berth-agent", "agent-pod": name}},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: sa,
			Containers:         []corev1.Container{{Name: "agent", Image: "berth-agent:e2e"}},
			// KWOK nodes carry no taints by default; tolerate everything as the DaemonSet does.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	for _, m := range mutate {
		m(pod)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	pods, err := framework.WaitPods(ctx, c.Client, ns, "agent-pod="+name, 1, time.Minute, framework.Running)
	if err != nil {
		return nil, fmt.Errorf("agent pod %s on %s: %w", name, node, err)
	}
	return &pods[0], nil
}

// MintToken asks the TokenRequest API for a token of sa bound to pod (as the kubelet does for
// a projected service-account volume).
func MintToken(ctx context.Context, c *cluster.Cluster, sa string, pod *corev1.Pod) (string, error) {
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to pod %s: %w", pod.Namespace, sa, pod.Name, err)
	}
	return tr.Status.Token, nil
}

// TokenKubeconfig writes a kubeconfig authenticating with token (the agent talks to the API
// server with its own service-account token, as in-cluster).
func TokenKubeconfig(c *cluster.Cluster, path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth-local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.PKI.CACert}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["berth-local"] = &clientcmdapi.Context{Cluster: "berth-local", AuthInfo: "agent"}
	cfg.CurrentContext = "berth-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// Watcher is a running berth-loadwatcher.
type Watcher struct {
	*cluster.Process
	URL string
	// ReaderTokenFile holds the cluster's watcher-reader token (cluster.WatcherReaderTokenFile),
	// which GetWatcher sends.
	ReaderTokenFile string
}

var (
	readersMu sync.Mutex
	// readers maps a watcher's URL to the reader token file GetWatcher sends it: the suites
	// call GetWatcher(ctx, url) with the URL alone.
	readers = map[string]string{}
)

// RegisterReader makes GetWatcher and WaitFresh send the token in file to the watcher at url.
func RegisterReader(url, file string) {
	readersMu.Lock()
	defer readersMu.Unlock()
	readers[url] = file
}

// ReaderClient is an HTTP client that shows the watcher at url the token registered for it.
func ReaderClient(url string) *http.Client {
	readersMu.Lock()
	defer readersMu.Unlock()
	return &http.Client{Transport: loadapi.NewTokenTransport(nil, readers[url])}
}

// StartWatcher runs bin/berth-loadwatcher as a cluster process on a free loopback port with the
// given extra flags and waits for /readyz.
func StartWatcher(ctx context.Context, c *cluster.Cluster, name, kubeconfig string, args ...string) (*Watcher, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	all := append([]string{"--listen=127.0.0.1:" + strconv.Itoa(port), "--kubeconfig=" + kubeconfig}, args...)
	p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: name, Binary: filepath.Join(c.BinDir, "berth-loadwatcher"), Args: all},
		cluster.HTTPCheck(url+"/readyz"))
	if err != nil {
		return nil, err
	}
	tf, err := c.WatcherReaderTokenFile(ctx)
	if err != nil {
		return nil, err
	}
	RegisterReader(url, tf)
	return &Watcher{Process: p, URL: url, ReaderTokenFile: tf}, nil
}

// Agent is a running berth-agent for one node.
type Agent struct {
	*cluster.Process
	Node      string
	URL       string // /metrics, /healthz, /readyz
	Addr      string // host:port
	TokenFile string
	Fixture   *fixture.Node

	stopWriter func()
}

// AgentOptions are the per-agent inputs.
type AgentOptions struct {
	// Name of the process (log file); default berth-agent-<node>.
	Name       string
	Load       NodeLoad
	Dir        string // fixture /proc and token files live here
	WatcherURL string
	// Token is the agent's pod-bound token; empty runs the agent without a cluster
	// (--watch-pods=false) and with a placeholder token, for sinks that do not check it.
	Token          string
	SampleInterval time.Duration
	ReportInterval time.Duration
	// Pods, if any, get cgroups in the fixture (read with --cgroup-root) with this use, as the
	// kubelet's pods have on a real node.
	Pods []fixture.Pod
}

// StartAgent writes the node's fixture /proc (kept moving until ctx ends), the token file and a
// kubeconfig with the same token, then runs bin/berth-agent and waits for /readyz.
func StartAgent(ctx context.Context, c *cluster.Cluster, o AgentOptions) (*Agent, error) {
	if o.Name == "" {
		o.Name = "berth-agent-" + o.Load.Name
	}
	dir := filepath.Join(o.Dir, o.Name)
	fx, err := fixture.New(filepath.Join(dir, "proc"), o.Load.CPU, o.Load.Memory)
	if err != nil {
		return nil, err
	}
	if len(o.Pods) > 0 {
		if err := fx.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
			return nil, err
		}
		if err := fx.SetPods(o.Pods); err != nil {
			return nil, err
		}
	}
	// Advance several times per sample so every sample sees exactly the configured load. The
	// writer stops with ctx or, at the latest, when the cluster stops, before the cluster's
	// directory is removed (it would otherwise recreate files under a directory being removed).
	wctx, cancelWriter := context.WithCancel(ctx)
	written := make(chan struct{})
	go func() { defer close(written); _ = fx.Run(wctx, o.SampleInterval/4) }()
	stopWriter := func() { cancelWriter(); <-written }
	c.OnStop(stopWriter)
	tokenFile := filepath.Join(dir, "token")
	token, clusterArgs := o.Token, []string{"--watch-pods=false"}
	if token == "" {
		token = "no-cluster-placeholder"
	} else {
		kc := filepath.Join(dir, "kubeconfig")
		if err := TokenKubeconfig(c, kc, o.Token); err != nil {
			return nil, err
		}
		clusterArgs = []string{"--kubeconfig=" + kc}
	}
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{
		"--node-name=" + o.Load.Name, "--proc-root=" + fx.Root, "--watcher-url=" + o.WatcherURL,
		"--token-file=" + tokenFile, "--listen=" + addr,
		"--sample-interval=" + o.SampleInterval.String(), "--report-interval=" + o.ReportInterval.String(),
	}, clusterArgs...)
	if root := fx.CgroupRoot(); root != "" {
		args = append(args, "--cgroup-root="+root)
	}
	p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: o.Name, Binary: filepath.Join(c.BinDir, "berth-agent"), Args: args},
		cluster.HTTPCheck("http://"+addr+"/readyz"))
	if err != nil {
		return nil, err
	}
	return &Agent{Process: p, Node: o.Load.Name, URL: "http://" + addr, Addr: addr, TokenFile: tokenFile, Fixture: fx, stopWriter: stopWriter}, nil
}

// Stop stops the agent process and its fixture writer, and returns once neither writes any
// more (so the fixture's directory can be removed).
func (a *Agent) Stop(c *cluster.Cluster) {
	c.StopComponent(a.Process)
	a.stopWriter()
}

// Options start a whole pipeline: one agent pod, token and agent process per node, and a load
// watcher with the agent source.
type Options struct {
	// Prefix names processes and agent pods (the demo runs beside other scenarios).
	Prefix         string
	Namespace      string // default AgentNamespace
	ServiceAccount string // default AgentServiceAccount
	Nodes          []NodeLoad
	Dir            string
	SampleInterval time.Duration // default 200ms
	ReportInterval time.Duration // default 1s
	// WatcherArgs are extra load watcher flags (e.g. --stale-after).
	WatcherArgs []string
}

// Stack is a running pipeline.
type Stack struct {
	Watcher   *Watcher
	Agents    map[string]*Agent
	AgentPods map[string]*corev1.Pod
	Opts      Options
}

// Start brings the pipeline up and waits until the watcher serves every node fresh.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (*Stack, error) {
	if o.Namespace == "" {
		o.Namespace = AgentNamespace
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = AgentServiceAccount
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = 200 * time.Millisecond
	}
	if o.ReportInterval == 0 {
		o.ReportInterval = time.Second
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(c.Dir, o.Prefix+"loadaware")
	}
	if err := EnsureAgentIdentity(ctx, c, o.Namespace, o.ServiceAccount); err != nil {
		return nil, err
	}
	kc, err := WatcherKubeconfig(ctx, c, o.Prefix+"berth-loadwatcher", o.Namespace)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--source=agent", "--agent-service-account=" + o.Namespace + "/" + o.ServiceAccount}, o.WatcherArgs...)
	w, err := StartWatcher(ctx, c, o.Prefix+"berth-loadwatcher", kc, args...)
	if err != nil {
		return nil, err
	}
	s := &Stack{Watcher: w, Agents: map[string]*Agent{}, AgentPods: map[string]*corev1.Pod{}, Opts: o}
	for _, n := range o.Nodes {
		pod, err := AgentPod(ctx, c, o.Namespace, o.ServiceAccount, o.Prefix+"berth-agent-"+n.Name, n.Name)
		if err != nil {
			return nil, err
		}
		s.AgentPods[n.Name] = pod
		tok, err := MintToken(ctx, c, o.ServiceAccount, pod)
		if err != nil {
			return nil, err
		}
		// The agent pod has a cgroup using nothing, as on a real node: its measured use, not a
		// best-effort pod's spec estimate, is what the scheduler counts for it.
		a, err := StartAgent(ctx, c, AgentOptions{Name: o.Prefix + "berth-agent-" + n.Name, Load: n, Dir: o.Dir,
			WatcherURL: w.URL, Token: tok, SampleInterval: o.SampleInterval, ReportInterval: o.ReportInterval,
			Pods: []fixture.Pod{{UID: string(pod.UID), QOS: "besteffort"}}})
		if err != nil {
			return nil, err
		}
		s.Agents[n.Name] = a
	}
	names := make([]string, 0, len(o.Nodes))
	for _, n := range o.Nodes {
		names = append(names, n.Name)
	}
	if _, err := WaitFresh(ctx, w.URL, names, time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// GetWatcher reads GET <url>/watcher?pods=true with the reader token registered for url.
func GetWatcher(ctx context.Context, url string) (*loadapi.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/watcher?pods=true", nil)
	if err != nil {
		return nil, err
	}
	resp, err := ReaderClient(url).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /watcher: %s: %s", resp.Status, body)
	}
	var out loadapi.Response
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET /watcher: %w", err)
	}
	return &out, nil
}

// CPU returns a node's CPU utilisation as TargetLoadPacking reads it: the last CPU metric with
// operator AVG or Latest; ok is false when the node has none (missing or stale).
func CPU(r *loadapi.Response, node string) (float64, bool) {
	nm, ok := r.Data.NodeMetricsMap[node]
	if !ok {
		return 0, false
	}
	v, found := 0.0, false
	for _, m := range nm.Metrics {
		if m.Type == "CPU" && (m.Operator == "AVG" || m.Operator == "Latest") {
			v, found = m.Value, true
		}
	}
	return v, found
}

// WaitFresh polls /watcher until every node has CPU metrics and returns that answer.
func WaitFresh(ctx context.Context, url string, nodes []string, timeout time.Duration) (*loadapi.Response, error) {
	var last *loadapi.Response
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		r, err := GetWatcher(ctx, url)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = r
		for _, n := range nodes {
			if _, ok := CPU(r, n); !ok {
				lastErr = fmt.Errorf("node %s has no CPU metric yet", n)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for fresh metrics of %v at %s: %v (last: %v)", nodes, url, err, lastErr)
	}
	return last, nil
}

// TLPConfig is a KubeSchedulerConfiguration with one profile, schedulerName, scoring with
// TargetLoadPacking only (so placements follow its formula alone; the other default plugins
// still filter) and enabling it at every extension point it implements (Reserve included, so
// bursts are accounted). Leader election is off: the process runs beside berth-scheduler.
func TLPConfig(schedulerName, watcherURL string, target, expirySeconds, refreshSeconds int) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled:
      - name: TargetLoadPacking
    score:
      disabled:
      - name: "*"
      enabled:
      - name: TargetLoadPacking
  pluginConfig:
  - name: TargetLoadPacking
    args:
      watcherAddress: %s
      targetUtilization: %d
      metricsExpirySeconds: %d
      refreshIntervalSeconds: %d
      watcherTimeoutSeconds: 2
`, schedulerName, watcherURL, target, expirySeconds, refreshSeconds)
}

// SchedulerMetrics returns a function reading a scheduler's /metrics (on 127.0.0.1:port) as the
// cluster admin; it returns "" when the page cannot be read.
func SchedulerMetrics(ctx context.Context, c *cluster.Cluster, port int) (func() string, error) {
	client, err := framework.AdminLoopbackClient(c)
	if err != nil {
		return nil, err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	return func() string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return ""
		}
		resp, err := client.Do(req)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}, nil
}

// Fetches sums berth_loadaware_watcher_fetch_total of plugin with result want, or of every
// failed result (neither success nor not_modified) when want is "".
func Fetches(page, plugin, want string) float64 {
	var sum float64
	for _, l := range strings.Split(page, "\n") {
		if !strings.HasPrefix(l, "berth_loadaware_watcher_fetch_total{") || !strings.Contains(l, `plugin="`+plugin+`"`) {
			continue
		}
		switch {
		case want == "" && (strings.Contains(l, `result="success"`) || strings.Contains(l, `result="not_modified"`)):
			continue
		case want != "" && !strings.Contains(l, `result="`+want+`"`):
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// WaitFetched waits until a scheduler has fetched the load watcher successfully for plugin (a
// pod scheduled before that would see every node neutral).
func WaitFetched(ctx context.Context, metrics func() string, plugin string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return Fetches(metrics(), plugin, "success") > 0, nil
	})
}
