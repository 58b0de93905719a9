package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// The identity Berth's processes on the local cluster show the load watcher. In a cluster the
// scheduler and operator pods carry projected tokens of their own accounts; a process here
// authenticates to the API server with a client certificate, which the watcher cannot check
// (it serves only bearer tokens it can review), so the harness mints a token for this account.
const (
	WatcherReaderNamespace = "kube-system"
	WatcherReaderAccount   = "berth-watcher-reader"
	// WatcherReaderRole grants what the chart's <prefix>-load-reader does.
	WatcherReaderRole = "berth-e2e-load-reader"
)

var (
	readerMu     sync.Mutex
	readerTokens = map[string]string{} // cluster directory -> token file
)

// WatcherReaderTokenFile returns a file holding a token of WatcherReaderAccount, allowed to read
// node load and pod lists from the load watcher (get nodeloads, nodeloads/pods). Minted once per
// cluster (valid 48 h: make up's clusters live long), with the API server's audience, which is
// what a watcher started without --token-audience reviews against.
func (c *Cluster) WatcherReaderTokenFile(ctx context.Context) (string, error) {
	readerMu.Lock()
	defer readerMu.Unlock()
	if f, ok := readerTokens[c.Dir]; ok {
		if _, err := os.Stat(f); err == nil {
			return f, nil
		}
	}
	_, err := c.Client.CoreV1().ServiceAccounts(WatcherReaderNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: WatcherReaderAccount}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("watcher reader account: %w", err)
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: WatcherReaderRole}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"berth.dev"}, Resources: []string{"nodeloads", "nodeloads/pods"}, Verbs: []string{"get"}}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("watcher reader role: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: WatcherReaderRole},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: WatcherReaderRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: WatcherReaderNamespace, Name: WatcherReaderAccount}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("watcher reader binding: %w", err)
	}
	exp := int64(48 * 3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(WatcherReaderNamespace).CreateToken(ctx, WatcherReaderAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("watcher reader token: %w", err)
	}
	f := filepath.Join(c.Dir, "watcher-reader.token")
	if err := os.WriteFile(f, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	readerTokens[c.Dir] = f
	return f, nil
}

// WatcherReaderEnv is the environment that makes a Berth process send that token to the watcher.
func (c *Cluster) WatcherReaderEnv(ctx context.Context) ([]string, error) {
	f, err := c.WatcherReaderTokenFile(ctx)
	if err != nil {
		return nil, err
	}
	return []string{loadapi.TokenFileEnv + "=" + f}, nil
}
