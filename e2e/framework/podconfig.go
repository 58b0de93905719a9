package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/images"
)

// PodConfig helpers shared by e2e/suites/podconfig, e2e/suites/podconfig-api and the demo: the
// CRDs, the administrator's PodNetworks (created and waited on until the operator decides
// them), the real berth-operator and berth-agent as processes of the cluster, the netecho
// workload, and views of the real node's network namespace.

// PodConfigClusterCIDRs are the harness's pod and service CIDRs, given to the operator as the
// chart's podConfig.clusterCIDRs would.
const PodConfigClusterCIDRs = "10.244.0.0/16,10.96.0.0/16"

// PodConfigAgentUser is the identity the agent process runs as; it gets exactly the chart's
// agent ClusterRole (PodConfigAgentRBAC), so the suite proves that role is enough.
const PodConfigAgentUser = "berth-agent-e2e"

// InstallPodConfigCRDs installs the PodConfig, PodNetwork and IPAllocation CRDs the chart
// ships and waits until they are served.
func InstallPodConfigCRDs(ctx context.Context, rc *rest.Config) error {
	for _, f := range []string{crds.PodConfigFile, crds.PodNetworkFile, crds.IPAllocationFile} {
		crd, err := crds.Load(f)
		if err != nil {
			return err
		}
		if err := cluster.InstallCRDs(ctx, rc, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// NewPodNetwork is a PodNetwork on bridge with cidr and gateway (empty: layer 2 only) granted
// to the namespaces whose labels include grant (empty: every namespace, written out as {} as
// the CRD requires).
func NewPodNetwork(name, bridge, cidr, gateway string, grant map[string]string) *berthv1alpha1.PodNetwork {
	return &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: bridge, CIDR: cidr, Gateway: gateway,
			NamespaceSelector: metav1.LabelSelector{MatchLabels: grant}}}
}

// WaitPodNetworkDecided waits until the operator has decided the PodNetwork's current
// generation (its Accepted condition observed that generation) and returns the network and
// that condition.
func WaitPodNetworkDecided(ctx context.Context, cl client.Client, name string, timeout time.Duration) (*berthv1alpha1.PodNetwork, *metav1.Condition, error) {
	pn := &berthv1alpha1.PodNetwork{}
	var cond *metav1.Condition
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if lastErr = cl.Get(ctx, client.ObjectKey{Name: name}, pn); lastErr != nil {
			return false, nil
		}
		cond = meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted)
		// why: a condition of an older generation is the decision about another spec.
		return cond != nil && cond.ObservedGeneration == pn.Generation, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("PodNetwork %s not decided by the operator within %s (last error %v, status %+v)", name, timeout, lastErr, pn.Status)
	}
	return pn, cond, nil
}

// CreatePodNetwork creates pn as a cluster administrator would and waits until the operator
// accepted it (Accepted=True) and holds it with its finalizer; a refusal is an error carrying
// the condition's message (the refused field and rule).
func CreatePodNetwork(ctx context.Context, cl client.Client, pn *berthv1alpha1.PodNetwork, timeout time.Duration) (*berthv1alpha1.PodNetwork, error) {
	if err := cl.Create(ctx, pn.DeepCopy()); err != nil {
		return nil, fmt.Errorf("creating PodNetwork %s: %w", pn.Name, err)
	}
	got, cond, err := WaitPodNetworkDecided(ctx, cl, pn.Name, timeout)
	if err != nil {
		return nil, err
	}
	if cond.Status != metav1.ConditionTrue {
		return got, fmt.Errorf("PodNetwork %s refused by the operator: %s: %s", pn.Name, cond.Reason, cond.Message)
	}
	// why: the finalizer is added before the first decision; a network without it could go
	// while addresses of it are still allocated.
	if !slices.Contains(got.Finalizers, berthv1alpha1.PodNetworkFinalizer) {
		return got, fmt.Errorf("PodNetwork %s accepted without the finalizer %s: %v", pn.Name, berthv1alpha1.PodNetworkFinalizer, got.Finalizers)
	}
	return got, nil
}

// DeletePodNetwork deletes the PodNetwork (nothing if it does not exist) and waits until it and
// its IPAllocation (same name) are gone: the operator's finalizer holds it while any of its
// addresses is allocated.
func DeletePodNetwork(ctx context.Context, cl client.Client, name string, timeout time.Duration) error {
	pn := &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Delete(ctx, pn); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var pnErr, poolErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pnErr = cl.Get(ctx, client.ObjectKey{Name: name}, &berthv1alpha1.PodNetwork{})
		poolErr = cl.Get(ctx, client.ObjectKey{Name: name}, &berthv1alpha1.IPAllocation{})
		return apierrors.IsNotFound(pnErr) && apierrors.IsNotFound(poolErr), nil
	})
	if err != nil {
		return fmt.Errorf("PodNetwork %s or its IPAllocation not gone within %s (network: %v, pool: %v)", name, timeout, pnErr, poolErr)
	}
	return nil
}

// CreatePodConfig creates pc and, when t ends, deletes it and waits (within timeout) until the
// finalizer let it go.
func CreatePodConfig(ctx context.Context, t testing.TB, cl client.Client, pc *berthv1alpha1.PodConfig, timeout time.Duration) {
	t.Helper()
	if err := cl.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(pc)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		obj := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := cl.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting PodConfig %s: %v", key, err)
			return
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout-5*time.Second, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(cl.Get(ctx, key, obj)), nil
		})
		if err != nil {
			t.Errorf("cleanup: PodConfig %s not gone: %+v", key, obj.Status)
		}
	})
}

// StartPodConfigOperator runs bin/berth-operator with the PodConfig controller (no leader
// election) and waits until it is ready; extra are more flags (e.g. --podconfig-allowed-parents).
func StartPodConfigOperator(ctx context.Context, c *cluster.Cluster, name string, extra ...string) (*cluster.Process, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	return c.StartComponent(ctx, cluster.ProcessSpec{
		Name: name, Binary: filepath.Join(c.BinDir, "berth-operator"),
		Args: append([]string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--metrics-bind-address=0",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
			"--podconfig", "--podconfig-cluster-cidrs=" + PodConfigClusterCIDRs}, extra...),
	}, cluster.HTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)))
}

// PodConfigAgentRBAC creates role (the chart's agent ClusterRole, rendered by the caller with
// podConfig.enabled) under another name and binds it to PodConfigAgentUser.
func PodConfigAgentRBAC(ctx context.Context, c *cluster.Cluster, role *rbacv1.ClusterRole) error {
	role = role.DeepCopy()
	role.Name, role.ResourceVersion = "berth-agent-e2e", ""
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berth-agent-e2e"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: PodConfigAgentUser}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// StartPodConfigAgent runs bin/berth-agent --podconfig for the real node, inside the node's
// network namespace (as the DaemonSet's hostNetwork pod would be), as PodConfigAgentUser.
// Its load part is not under test: its first report is due after an hour.
func StartPodConfigAgent(ctx context.Context, c *cluster.Cluster, name string, extra ...string) (*cluster.Process, error) {
	rn := c.RealNode()
	if rn == nil {
		return nil, fmt.Errorf("the PodConfig agent needs the real node")
	}
	return StartPodConfigAgentOn(ctx, c, rn, name, extra...)
}

// StartPodConfigAgentOn is StartPodConfigAgent for real node rn (any of the cluster's).
func StartPodConfigAgentOn(ctx context.Context, c *cluster.Cluster, rn *cluster.RealNode, name string, extra ...string) (*cluster.Process, error) {
	return StartAgentOn(ctx, c, rn, name, PodConfigAgentUser,
		append([]string{"--image-interval=1h", "--podconfig", "--podconfig-resync=5s"}, extra...)...)
}

// StartAgentOn runs bin/berth-agent for real node rn, inside rn's network namespace (as the
// DaemonSet's hostNetwork pod would be), as user, against rn's containerd; extra are more
// flags. Its load part is idle: its first report is due after an hour.
func StartAgentOn(ctx context.Context, c *cluster.Cluster, rn *cluster.RealNode, name, user string, extra ...string) (*cluster.Process, error) {
	kc, err := c.WriteNodeKubeconfig(rn, name, cluster.Identity{User: user})
	if err != nil {
		return nil, err
	}
	tok := filepath.Join(c.Dir, name+".token")
	if err := os.WriteFile(tok, []byte("unused"), 0o600); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"--node-name=" + rn.NodeName, "--kubeconfig=" + kc, "--watch-pods=false",
		"--watcher-url=http://[::1]:9", "--token-file=" + tok, "--listen=" + addr,
		"--sample-interval=200ms", "--report-interval=1h", "--cri-socket=" + rn.ContainerdSocket, "-v=2"}, extra...)
	return c.StartNodeComponent(ctx, rn, cluster.ProcessSpec{Name: name, Binary: filepath.Join(c.BinDir, "berth-agent"), Args: args},
		rn.HTTPCheck("http://"+addr+"/readyz"))
}

// NetechoImage builds the netecho image tarball into dir (about 5 s) for RealNodeConfig.Images.
func NetechoImage(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	res, err := images.BuildAll(ctx, images.Options{Root: root, OutDir: dir, Only: []string{"netecho"}})
	if err != nil {
		return "", err
	}
	return res[0].Path, nil
}

// NetechoPod is an unprivileged netecho pod (non-root, no capabilities, RuntimeDefault
// seccomp, read-only root) pinned to node.
func NetechoPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](images.Nonroot),
				RunAsGroup: ptr.To[int64](images.Nonroot), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "netecho", Image: images.NetechoRef, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
		},
	}
}

// NetechoIface is one interface a netecho pod reports.
type NetechoIface struct {
	Name  string   `json:"name"`
	MTU   int      `json:"mtu"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs"`
}

// NetechoReply is a netecho /send answer.
type NetechoReply struct {
	Payload  string `json:"payload"`
	SeenFrom string `json:"seenFrom"`
	Server   string `json:"server"`
}

func netechoGet(ctx context.Context, rn *cluster.RealNode, podIP, path string, out any) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: rn.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(podIP, "8080")+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %s: %s", path, podIP, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

// NetechoInterfaces asks the pod (over its cluster address, from the node's namespace) for its
// interfaces, by name.
func NetechoInterfaces(ctx context.Context, rn *cluster.RealNode, podIP string) (map[string]NetechoIface, error) {
	var ifs []NetechoIface
	if err := netechoGet(ctx, rn, podIP, "/interfaces", &ifs); err != nil {
		return nil, err
	}
	out := map[string]NetechoIface{}
	for _, i := range ifs {
		out[i.Name] = i
	}
	return out, nil
}

// NetechoSend makes the pod at podIP send one echo request to "to" (IP:port) over proto.
func NetechoSend(ctx context.Context, rn *cluster.RealNode, podIP, proto, to string) (NetechoReply, error) {
	var r NetechoReply
	err := netechoGet(ctx, rn, podIP, "/send?proto="+proto+"&to="+to, &r)
	return r, err
}

// volatile are `ip -d` fields that change on their own (bridge timers, statistics).
var volatile = regexp.MustCompile(`\s(\S+_timer|tx_queue_len|gso_max_\S+|gro_max_\S+|tso_max_\S+)\s+\S+`)

// NodeNetState is the node namespace's links (`ip -o -d link`) and addresses (`ip -o addr`),
// one sorted line each, with self-changing fields left out: equal states mean nothing was
// added or left behind.
func NodeNetState(ctx context.Context, rn *cluster.RealNode) ([]string, error) {
	var out []string
	for _, args := range [][]string{{"-o", "-d", "link", "show"}, {"-o", "addr", "show"}} {
		s, err := rn.InNetNS(ctx, "ip", args...)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			l = volatile.ReplaceAllString(l, "")
			// Link state flags of the CNI bridge flip with its ports' carrier.
			l = regexp.MustCompile(`state \S+|\stentative\s`).ReplaceAllString(l, " ")
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	sort.Strings(out)
	return out, nil
}
