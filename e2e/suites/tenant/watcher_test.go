package tenant

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/scheduler/rbac"
)

// TestTenantReadsOfTheLoadWatcher is issue 35's fourth door: a tenant who knows a victim's pod
// must not learn its node from the load watcher. On a real API server with the real
// berth-loadwatcher and agent, a ServiceAccount bound only to `edit` in its namespace reads the
// watcher without a token (401), with its own token (403, naming the permission it lacks), and
// so does Berth's own agent account (reporting is not reading); the scheduler's account, with
// the plugin role the operator grants it, reads node load and pod lists. Every refusal is
// counted by reason, and none carries any of the document.
func TestTenantReadsOfTheLoadWatcher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{WithoutDefaultScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "victim-node", CPU: "8", Memory: "16Gi"}); err != nil {
		t.Fatal(err)
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "tenant-", Nodes: []stack.NodeLoad{{Name: "victim-node", CPU: 40, Memory: 30}}})
	if err != nil {
		t.Fatal(err)
	}
	// The agent pod's UID is what the watcher lists on victim-node: the "victim" a tenant knows.
	victimUID := string(st.AgentPods["victim-node"].UID)

	const tenantNS, tenantSA = "watcher-tenant", "tenant"
	if err := framework.EnsureNamespace(ctx, c.Client, tenantNS); err != nil {
		t.Fatal(err)
	}
	if err := stack.EnsureServiceAccount(ctx, c, tenantNS, tenantSA); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: tenantNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenantNS, Name: tenantSA}}}
	if _, err := c.Client.RbacV1().RoleBindings(tenantNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The scheduler's account with the RBAC the operator gives every scheduler it runs.
	const schedNS, schedSA = "berth-system", "berth-scheduler"
	if err := stack.EnsureServiceAccount(ctx, c, schedNS, schedSA); err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(ctx, c.Client, rbac.SchedulerRBAC(rbac.ServiceAccountSubject(schedNS, schedSA), "tenant-e2e-scheduler", "kube-system")); err != nil {
		t.Fatal(err)
	}
	token := func(ns, sa string) string {
		t.Helper()
		exp := int64(3600)
		tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s/%s: %v", ns, sa, err)
		}
		return tr.Status.Token
	}
	// The tenant's token is its own: `edit` lets it mint tokens of its namespace's accounts, so
	// the test mints it with the tenant's own credentials, as the attacker would.
	tenantKC := filepath.Join(c.Dir, "tenant-watcher.kubeconfig")
	if err := stack.TokenKubeconfig(c, tenantKC, token(tenantNS, tenantSA)); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", tenantKC)
	if err != nil {
		t.Fatal(err)
	}
	tenantClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	own, err := tenantClient.CoreV1().ServiceAccounts(tenantNS).CreateToken(ctx, tenantSA, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the tenant mints its own token: %v", err)
	}
	agentToken, err := stack.MintToken(ctx, c, stack.AgentServiceAccount, st.AgentPods["victim-node"])
	if err != nil {
		t.Fatal(err)
	}

	get := func(path, header, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.Watcher.URL+path, nil)
		if header != "" {
			req.Header.Set(header, "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, path, header, token string
		status                    int
		inBody                    string
	}{
		{"tenant without a token: pod lists", "/watcher?pods=true", "", "", 401, "no_token"},
		{"tenant without a token: node load", "/watcher", "", "", 401, "no_token"},
		{"tenant without a token: one node", "/watcher/victim-node", "", "", 401, "no_token"},
		{"tenant without a token: upstream per-host form", "/watcher?host=victim-node", "", "", 401, "no_token"},
		{"tenant with its own token", "/watcher?pods=true", "Authorization", own.Status.Token, 403,
			`forbidden: user "system:serviceaccount:watcher-tenant:tenant" may not get nodeloads/pods.berth.dev`},
		{"tenant with its own token in the proxy's header", "/watcher", loadapi.ReadTokenHeader, own.Status.Token, 403, "may not get nodeloads.berth.dev"},
		{"a forged token", "/watcher", "Authorization", "forged." + own.Status.Token, 401, "invalid_token"},
		{"the agent's pod-bound token: reporting is not reading", "/watcher?pods=true", "Authorization", agentToken, 403, "may not get nodeloads/pods.berth.dev"},
		{"the scheduler's account reads pod lists", "/watcher?pods=true", "Authorization", token(schedNS, schedSA), 200, victimUID},
		{"the scheduler's account reads one node", "/watcher/victim-node?pods=true", "Authorization", token(schedNS, schedSA), 200, victimUID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path, tc.header, tc.token)
			if code != tc.status || !strings.Contains(body, tc.inBody) {
				t.Fatalf("GET %s: %d %q, want %d containing %q", tc.path, code, body, tc.status, tc.inBody)
			}
			if code != 200 && (strings.Contains(body, victimUID) || strings.Contains(body, "victim-node")) {
				t.Fatalf("refusal carries the document: %s", body)
			}
		})
	}

	t.Run("refusals are counted by reason", func(t *testing.T) {
		_, page := get("/metrics", "", "")
		for reason, want := range map[string]string{"no_token": " 4", "forbidden": " 3", "invalid_token": " 1"} {
			line := ""
			for _, l := range strings.Split(page, "\n") {
				if strings.HasPrefix(l, `berth_loadwatcher_reads_refused_total{reason="`+reason+`"}`) {
					line = l
				}
			}
			if !strings.HasSuffix(line, want) {
				t.Errorf("reads_refused_total{reason=%q}: %q, want%s", reason, line, want)
			}
		}
	})
	_ = os.Remove(tenantKC)
}
