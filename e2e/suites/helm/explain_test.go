package helm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// explainReaderNS holds the test's ServiceAccounts: outside the release namespace, so nothing
// there grants them anything by accident.
const explainReaderNS = "default"

// explainAccount creates a ServiceAccount bound to the chart's explain-reader ClusterRole
// (ClusterRoleBinding) and/or Role (RoleBinding in the release namespace) and nothing else,
// and returns a kubeconfig holding its token. Everything is deleted when the test ends.
func explainAccount(ctx context.Context, t *testing.T, c *cluster.Cluster, name string, clusterRole, role bool) string {
	t.Helper()
	return readerAccount(ctx, t, c, name, release+"-explain-reader", clusterRole, role)
}

// readerAccount is explainAccount for the chart's reader roles named reader (ClusterRole and
// Role of the same name).
func readerAccount(ctx context.Context, t *testing.T, c *cluster.Cluster, name, reader string, clusterRole, role bool) string {
	t.Helper()
	cs := c.Client
	if _, err := cs.CoreV1().ServiceAccounts(explainReaderNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ServiceAccounts(explainReaderNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: explainReaderNS, Name: name}}
	if clusterRole {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	if role {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: reader}}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().RoleBindings(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	tr, err := cs.CoreV1().ServiceAccounts(explainReaderNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth-local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.PKI.CACert}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["berth-local"] = &clientcmdapi.Context{Cluster: "berth-local", AuthInfo: name, Namespace: explainReaderNS}
	cfg.CurrentContext = "berth-local"
	// In the cluster's own directory: removed with it.
	path := filepath.Join(c.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectlBerth runs `kubectl berth` as the user of kubeconfig, the way the chart's NOTES say:
// the built kubectl finds the plugin bin/kubectl-berth on PATH.
func kubectlBerth(ctx context.Context, c *cluster.Cluster, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"berth"}, append(args, "--kubeconfig="+kubeconfig, "--request-timeout=10s")...)...)
	cmd.Env = append(os.Environ(), "PATH="+c.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// testExplain proves `kubectl berth explain` on the helm-installed scheduler with the chart's
// roles only: the reader finds the leader from its Lease, port-forwards to its pod and reads
// each bound pod's record (its node chosen, with scores); without the ClusterRole the scheduler
// itself answers 403; without either, the Lease is already refused; and the Role's
// pods/portforward reaches no other pod of the namespace (the chart's policy).
func testExplain(ctx context.Context, t *testing.T, c *cluster.Cluster, bound []corev1.Pod) {
	if len(bound) == 0 {
		t.Fatal("no pod was bound by berth-scheduler (the workload subtest failed)")
	}
	reader := explainAccount(ctx, t, c, "e2e-explain-reader", true, true)
	roleOnly := explainAccount(ctx, t, c, "e2e-explain-role-only", false, true)
	nobody := explainAccount(ctx, t, c, "e2e-explain-nobody", false, false)

	// One chosen row per pod: the node, its Filter verdict, per-plugin scores, TOTAL, "*".
	scored := 0
	for _, p := range bound {
		var out, errOut string
		// The bindings reach the API server's authorizer, and through SubjectAccessReview the
		// scheduler's, within moments; poll briefly rather than sleep.
		var runErr error
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
			// why: the suite's ctx, not the poll's: a run cut short by the poll's deadline
			// would leave nothing to report.
			out, errOut, runErr = kubectlBerth(ctx, c, reader, "explain", "pod", p.Name, "-n", p.Namespace)
			if runErr != nil {
				t.Logf("kubectl berth explain pod %s/%s: %v: %s", p.Namespace, p.Name, runErr, strings.TrimSpace(errOut))
			}
			return runErr == nil, nil
		})
		if err != nil {
			t.Fatalf("kubectl berth explain pod %s/%s as the explain reader: %v\nstdout:\n%s\nstderr:\n%s", p.Namespace, p.Name, runErr, out, errOut)
		}
		t.Logf("kubectl berth explain pod %s/%s:\n%s%s", p.Namespace, p.Name, errOut, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want := "Scheduled on " + p.Spec.NodeName; !strings.HasSuffix(lines[0], want) {
			t.Errorf("first line %q, want it to end with %q", lines[0], want)
		}
		// why only for a scored record: a batched cycle reuses an identical earlier pod's scores
		// and its record points there (the chart's pack preset puts both replicas on one node).
		if !strings.Contains(out, "Opportunistic batching hinted") && !strings.Contains(out, "TargetLoadPacking(×1)") {
			t.Errorf("no TargetLoadPacking column (weight 1 in the chart's values):\n%s", out)
		}
		row := ""
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 2 && f[0] == p.Spec.NodeName && f[len(f)-1] == "*" {
				row = l
			}
		}
		if row == "" {
			t.Errorf("no row marks %s chosen:\n%s", p.Spec.NodeName, out)
			continue
		}
		// With two feasible nodes the scheduler scores, unless opportunistic batching reused
		// an identical earlier pod's scores (the record then points at that pod).
		f := strings.Fields(row)
		if regexp.MustCompile(`^[0-9]+$`).MatchString(f[len(f)-2]) && f[1] == "passed" {
			scored++
		} else if !strings.Contains(out, "Opportunistic batching hinted") {
			t.Errorf("chosen row without a total and no batching hint: %q", row)
		}
	}
	if scored == 0 {
		t.Errorf("no record shows the chosen node's scores")
	}

	// Same command, same leader, no ClusterRole: the scheduler's delegated authorisation says no.
	p := bound[0]
	out, errOut, err := kubectlBerth(ctx, c, roleOnly, "explain", "pod", p.Name, "-n", p.Namespace)
	t.Logf("without the ClusterRole: %v: %s", err, strings.TrimSpace(errOut))
	if err == nil || !strings.Contains(errOut, "refused the request (403)") || !strings.Contains(errOut, "/debug/berth/explain") {
		t.Errorf("without the explain-reader ClusterRole: err %v, want the scheduler's 403 naming /debug/berth/explain\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if strings.Contains(out, "Scheduled on") {
		t.Errorf("a record was shown without the ClusterRole:\n%s", out)
	}
	// No binding at all: the API server refuses the Lease before anything reaches the scheduler.
	out, errOut, err = kubectlBerth(ctx, c, nobody, "explain", "pod", p.Name, "-n", p.Namespace)
	t.Logf("without any binding: %v: %s", err, strings.TrimSpace(errOut))
	if err == nil || !strings.Contains(errOut, "forbidden") || !strings.Contains(errOut, "Lease") {
		t.Errorf("without any binding: err %v, want the Lease read forbidden\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}

	// The Role's pods/portforward is for the scheduler only: the agent's pod (host network)
	// is refused by the chart's admission policy, naming what it would take.
	agents, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-agent", 1, time.Minute, ready)
	if err != nil {
		t.Fatal(err)
	}
	err = portForwardOnce(ctx, reader, &agents[0], 10250)
	t.Logf("port-forward to the agent pod: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pods/exec") {
		t.Errorf("port-forward to the agent pod %s as the explain reader: %v; want refused by the chart's policy naming pods/exec", agents[0].Name, err)
	}
}

// portForwardOnce opens (and closes) a port-forward to pod's port as the user of kubeconfig, as
// kubectl berth does, and returns why it could not.
func portForwardOnce(ctx context.Context, kubeconfig string, pod *corev1.Pod, port int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
		// why: client-go upgrades the connection before it listens, so ready means the API
		// server let the port-forward through.
		return nil
	case err := <-failed:
		return fmt.Errorf("%v %s", err, errOut.String())
	case <-ctx.Done():
		return ctx.Err()
	}
}
