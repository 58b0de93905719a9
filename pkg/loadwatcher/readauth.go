package loadwatcher

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// The virtual resource a reader must be allowed to `get` (no CRD backs it: RBAC rules may name
// any resource, and SubjectAccessReview evaluates them all the same). The pod lists and per-pod
// usage of `?pods=true` are a subresource, so a role can grant node load without the map from
// pod to node.
const (
	ReadGroup          = "berth.dev"
	ReadResource       = "nodeloads"
	ReadPodSubresource = "pods"
	ReadVerb           = "get"
)

// ReadTokenHeader: see loadapi.ReadTokenHeader.
const ReadTokenHeader = loadapi.ReadTokenHeader

// Read refusal reasons (berth_loadwatcher_reads_refused_total{reason}).
const (
	ReasonReadNoToken   = "no_token"
	ReasonReadForbidden = "forbidden"
)

// ReadAuthorizer decides who may GET the watcher's documents: the token is checked with
// TokenReview (the reviewer the agents' reports use, with its cache), then the user with a
// SubjectAccessReview for `get nodeloads.berth.dev` (and `nodeloads/pods` for pod lists), so an
// administrator grants reads with RBAC, like any other permission, and the audit log shows them.
type ReadAuthorizer struct {
	Reviewer *TokenReviewer
	// Anonymous allows every read without a token (upstream clients that cannot send one).
	Anonymous bool

	client   kubernetes.Interface
	allowTTL time.Duration
	denyTTL  time.Duration

	mu    sync.Mutex
	cache map[string]cachedDecision
}

type cachedDecision struct {
	allowed bool
	reason  string
	expires time.Time
}

// maxCachedDecisions bounds the decision cache: readers are a handful of components and users.
const maxCachedDecisions = 4096

// NewReadAuthorizer builds the read check. Allowed decisions are cached for the reviewer's TTL,
// denials for at most 10 s, so a role just bound takes effect quickly and a removed one within
// the TTL.
func NewReadAuthorizer(client kubernetes.Interface, reviewer *TokenReviewer) *ReadAuthorizer {
	deny := min(reviewer.cacheTTL, 10*time.Second)
	return &ReadAuthorizer{Reviewer: reviewer, client: client, allowTTL: reviewer.cacheTTL, denyTTL: deny, cache: map[string]cachedDecision{}}
}

// ReadToken is the bearer token of a read: Authorization, else ReadTokenHeader.
func ReadToken(r *http.Request) (string, bool) {
	if tok, ok := BearerToken(r); ok {
		return tok, true
	}
	h := r.Header.Get(ReadTokenHeader)
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// AuthorizeRead returns nil when r may read; pods says whether it asks for pod lists.
func (a *ReadAuthorizer) AuthorizeRead(ctx context.Context, r *http.Request, pods bool) error {
	if a.Anonymous {
		return nil
	}
	token, ok := ReadToken(r)
	if !ok {
		return &AuthError{Status: http.StatusUnauthorized, Reason: ReasonReadNoToken,
			Msg: "reading node load needs a bearer token (Authorization or " + ReadTokenHeader + ") of an identity allowed to " + readPermission(pods)}
	}
	u, err := a.Reviewer.Review(ctx, token)
	if err != nil {
		return err
	}
	return a.authorize(ctx, u, pods)
}

func readPermission(pods bool) string {
	if pods {
		return fmt.Sprintf("%s %s/%s.%s", ReadVerb, ReadResource, ReadPodSubresource, ReadGroup)
	}
	return fmt.Sprintf("%s %s.%s", ReadVerb, ReadResource, ReadGroup)
}

func (a *ReadAuthorizer) authorize(ctx context.Context, u authnv1.UserInfo, pods bool) error {
	sub := ""
	if pods {
		sub = ReadPodSubresource
	}
	// The user's name, uid and groups decide; extra too (SAR passes it to webhooks), but bound
	// tokens' extra names the pod, which would make every pod of a Deployment a cache entry of
	// its own for the same answer under RBAC.
	key := u.Username + "\x00" + u.UID + "\x00" + strings.Join(u.Groups, "\x00") + "\x00" + sub
	now := a.Reviewer.now()
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if !ok || !now.Before(c.expires) {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extraOf(u.Extra),
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: ReadVerb, Group: ReadGroup, Resource: ReadResource, Subresource: sub},
		}}
		res, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return &AuthError{Status: http.StatusServiceUnavailable, Reason: ReasonAuthUnavailable, Msg: "SubjectAccessReview failed: " + err.Error()}
		}
		c = cachedDecision{allowed: res.Status.Allowed, reason: res.Status.Reason, expires: now.Add(a.allowTTL)}
		if !c.allowed {
			c.expires = now.Add(a.denyTTL)
		}
		if a.allowTTL > 0 {
			a.mu.Lock()
			if len(a.cache) >= maxCachedDecisions {
				clear(a.cache)
			}
			a.cache[key] = c
			a.mu.Unlock()
		}
	}
	if c.allowed {
		return nil
	}
	msg := fmt.Sprintf("user %q may not %s: bind the chart's load-reader ClusterRole (or a role granting it) to read node load", u.Username, readPermission(pods))
	if c.reason != "" {
		msg += " (" + c.reason + ")"
	}
	return &AuthError{Status: http.StatusForbidden, Reason: ReasonReadForbidden, Msg: msg}
}

func extraOf(e map[string]authnv1.ExtraValue) map[string]authzv1.ExtraValue {
	if len(e) == 0 {
		return nil
	}
	out := make(map[string]authzv1.ExtraValue, len(e))
	for k, v := range e {
		out[k] = authzv1.ExtraValue(v)
	}
	return out
}
