package loadwatcher

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
)

// Extra keys the API server sets on service-account tokens bound to a pod (and, since
// Kubernetes 1.30 with ServiceAccountTokenPodNodeInfo, to the pod's node).
const (
	ExtraPodName  = "authentication.kubernetes.io/pod-name"
	ExtraPodUID   = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName = "authentication.kubernetes.io/node-name"
)

// Identity is who sent a report, as the API server vouches.
type Identity struct {
	Username       string
	Namespace      string
	ServiceAccount string
	PodName        string
	PodUID         string
	// NodeName is empty when the API server does not add node info to tokens; Authorize then
	// looks the pod up.
	NodeName string
}

// AuthError is a refused request: Status is the HTTP status, Reason the counter label.
type AuthError struct {
	Status int
	Reason string
	Msg    string
}

func (e *AuthError) Error() string { return e.Reason + ": " + e.Msg }

// PodGetter finds a pod (an informer lister in the binary, a fake clientset in tests).
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// Authenticator checks agent tokens with TokenReview and that the caller may report for a node.
type Authenticator struct {
	client kubernetes.Interface
	// allowed service accounts, "namespace/name".
	allowed   map[string]bool
	audiences []string
	getPod    PodGetter
	cacheTTL  time.Duration
	now       func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedIdentity
}

type cachedIdentity struct {
	id      Identity
	expires time.Time
}

// maxCachedTokens bounds the cache: a few tokens per node of a 5000-node cluster.
const maxCachedTokens = 20000

// NewAuthenticator builds an authenticator. allowed lists "namespace/name" service accounts;
// audiences (optional) are passed to TokenReview; cacheTTL > 0 caches successful reviews for that
// long, so 5000 agents pushing every 15 s do not cost 333 TokenReviews per second (the price: a
// token revoked by deleting its pod is still accepted for up to cacheTTL).
func NewAuthenticator(client kubernetes.Interface, allowed []string, audiences []string, getPod PodGetter, cacheTTL time.Duration) (*Authenticator, error) {
	a := &Authenticator{client: client, allowed: map[string]bool{}, audiences: audiences, getPod: getPod,
		cacheTTL: cacheTTL, now: time.Now, cache: map[[32]byte]cachedIdentity{}}
	for _, sa := range allowed {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("service account %q: want namespace/name", sa)
		}
		a.allowed[sa] = true
	}
	if len(a.allowed) == 0 {
		return nil, fmt.Errorf("no agent service account allowed")
	}
	if getPod == nil {
		a.getPod = func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
			return client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	return a, nil
}

// BearerToken extracts the token of an "Authorization: Bearer" header.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Authenticate reviews token and checks the service account is an allowed agent account.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	if a.cacheTTL > 0 {
		a.mu.Lock()
		c, ok := a.cache[key]
		a.mu.Unlock()
		if ok && now.Before(c.expires) {
			return c.id, nil
		}
	}
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.audiences}}
	res, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, &AuthError{Status: http.StatusServiceUnavailable, Reason: ReasonAuthUnavailable, Msg: "TokenReview failed: " + err.Error()}
	}
	if !res.Status.Authenticated {
		msg := res.Status.Error
		if msg == "" {
			msg = "token not authenticated"
		}
		return Identity{}, &AuthError{Status: http.StatusUnauthorized, Reason: ReasonInvalidToken, Msg: msg}
	}
	u := res.Status.User
	ns, name, err := serviceaccount.SplitUsername(u.Username)
	if err != nil {
		return Identity{}, &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongSA, Msg: fmt.Sprintf("user %q is not a service account", u.Username)}
	}
	if !a.allowed[ns+"/"+name] {
		return Identity{}, &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongSA, Msg: fmt.Sprintf("service account %s/%s is not an agent account", ns, name)}
	}
	id := Identity{Username: u.Username, Namespace: ns, ServiceAccount: name,
		PodName: first(u.Extra[ExtraPodName]), PodUID: first(u.Extra[ExtraPodUID]), NodeName: first(u.Extra[ExtraNodeName])}
	if id.PodName == "" || id.PodUID == "" {
		// A legacy secret-based or unbound token is not tied to a pod, so it cannot prove
		// which node it speaks for.
		return Identity{}, &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongNode, Msg: "token is not bound to a pod"}
	}
	if a.cacheTTL > 0 {
		a.mu.Lock()
		if len(a.cache) >= maxCachedTokens {
			for k, c := range a.cache {
				if !now.Before(c.expires) {
					delete(a.cache, k)
				}
			}
			if len(a.cache) >= maxCachedTokens {
				clear(a.cache)
			}
		}
		a.cache[key] = cachedIdentity{id: id, expires: now.Add(a.cacheTTL)}
		a.mu.Unlock()
	}
	return id, nil
}

// Authorize checks that id's pod runs on node.
func (a *Authenticator) Authorize(ctx context.Context, id Identity, node string) error {
	if id.NodeName != "" {
		if id.NodeName != node {
			return &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongNode,
				Msg: fmt.Sprintf("pod %s/%s runs on node %q, reported for %q", id.Namespace, id.PodName, id.NodeName, node)}
		}
		return nil
	}
	pod, err := a.getPod(ctx, id.Namespace, id.PodName)
	if apierrors.IsNotFound(err) {
		return &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongNode, Msg: fmt.Sprintf("pod %s/%s not found", id.Namespace, id.PodName)}
	}
	if err != nil {
		return &AuthError{Status: http.StatusServiceUnavailable, Reason: ReasonAuthUnavailable, Msg: "pod lookup: " + err.Error()}
	}
	switch {
	case string(pod.UID) != id.PodUID:
		// The token's pod was deleted and another took its name.
		return &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongNode, Msg: fmt.Sprintf("pod %s/%s has UID %s, token is for %s", id.Namespace, id.PodName, pod.UID, id.PodUID)}
	case pod.Spec.ServiceAccountName != id.ServiceAccount:
		return &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongSA, Msg: fmt.Sprintf("pod %s/%s runs as %q", id.Namespace, id.PodName, pod.Spec.ServiceAccountName)}
	case pod.Spec.NodeName != node:
		return &AuthError{Status: http.StatusForbidden, Reason: ReasonWrongNode,
			Msg: fmt.Sprintf("pod %s/%s runs on node %q, reported for %q", id.Namespace, id.PodName, pod.Spec.NodeName, node)}
	}
	return nil
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
