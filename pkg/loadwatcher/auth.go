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

// TokenReviewer checks bearer tokens with TokenReview and caches what the API server said
// about the ones it authenticated. The agents' report check and the readers' check share one, so
// a token is reviewed once per TTL whichever path it comes by.
type TokenReviewer struct {
	client    kubernetes.Interface
	audiences []string
	cacheTTL  time.Duration
	now       func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedUser
}

type cachedUser struct {
	user    authnv1.UserInfo
	expires time.Time
}

// maxCachedTokens bounds the cache: a few tokens per node of a 5000-node cluster.
const maxCachedTokens = 20000

// NewTokenReviewer builds a reviewer. audiences (optional) are passed to TokenReview; cacheTTL > 0
// caches successful reviews for that long, so 5000 agents pushing every 15 s do not cost 333
// TokenReviews per second (the price: a token revoked by deleting its pod is still accepted for
// up to cacheTTL). Failed reviews are never cached: a bad token costs the caller a review each
// time, and the API server's own rate limits apply.
func NewTokenReviewer(client kubernetes.Interface, audiences []string, cacheTTL time.Duration) *TokenReviewer {
	return &TokenReviewer{client: client, audiences: audiences, cacheTTL: cacheTTL, now: time.Now, cache: map[[32]byte]cachedUser{}}
}

// Review returns the user the API server vouches for token.
func (t *TokenReviewer) Review(ctx context.Context, token string) (authnv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := t.now()
	if t.cacheTTL > 0 {
		t.mu.Lock()
		c, ok := t.cache[key]
		t.mu.Unlock()
		if ok && now.Before(c.expires) {
			return c.user, nil
		}
	}
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: t.audiences}}
	res, err := t.client.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, &AuthError{Status: http.StatusServiceUnavailable, Reason: ReasonAuthUnavailable, Msg: "TokenReview failed: " + err.Error()}
	}
	if !res.Status.Authenticated {
		msg := res.Status.Error
		if msg == "" {
			msg = "token not authenticated"
		}
		return authnv1.UserInfo{}, &AuthError{Status: http.StatusUnauthorized, Reason: ReasonInvalidToken, Msg: msg}
	}
	if t.cacheTTL > 0 {
		t.mu.Lock()
		if len(t.cache) >= maxCachedTokens {
			for k, c := range t.cache {
				if !now.Before(c.expires) {
					delete(t.cache, k)
				}
			}
			if len(t.cache) >= maxCachedTokens {
				clear(t.cache)
			}
		}
		t.cache[key] = cachedUser{user: res.Status.User, expires: now.Add(t.cacheTTL)}
		t.mu.Unlock()
	}
	return res.Status.User, nil
}

// Authenticator checks agent tokens with TokenReview and that the caller may report for a node.
type Authenticator struct {
	*TokenReviewer
	// allowed service accounts, "namespace/name".
	allowed map[string]bool
	getPod  PodGetter
}

// NewAuthenticator builds an authenticator. allowed lists "namespace/name" service accounts;
// audiences and cacheTTL are the TokenReviewer's.
func NewAuthenticator(client kubernetes.Interface, allowed []string, audiences []string, getPod PodGetter, cacheTTL time.Duration) (*Authenticator, error) {
	return NewAuthenticatorWith(NewTokenReviewer(client, audiences, cacheTTL), allowed, getPod)
}

// NewAuthenticatorWith builds an authenticator on a reviewer shared with the read check.
func NewAuthenticatorWith(reviewer *TokenReviewer, allowed []string, getPod PodGetter) (*Authenticator, error) {
	a := &Authenticator{TokenReviewer: reviewer, allowed: map[string]bool{}, getPod: getPod}
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
		client := reviewer.client
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
	u, err := a.Review(ctx, token)
	if err != nil {
		return Identity{}, err
	}
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
