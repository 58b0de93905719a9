package loadwatcher

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// tokenUser is what the fake API server answers for a token; a missing token is unauthenticated.
type tokenUser struct {
	user  string
	extra map[string]authnv1.ExtraValue
}

func agentUser(sa, pod, uid, node string) tokenUser {
	extra := map[string]authnv1.ExtraValue{ExtraPodName: {pod}, ExtraPodUID: {uid}}
	if node != "" {
		extra[ExtraNodeName] = authnv1.ExtraValue{node}
	}
	return tokenUser{user: "system:serviceaccount:" + sa, extra: extra}
}

// fakeReviews installs a TokenReview reactor; it returns a counter of reviews made.
func fakeReviews(cs *fake.Clientset, tokens map[string]tokenUser, fail error) *int {
	n := new(int)
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*n++
		if fail != nil {
			return true, nil, fail
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if u, ok := tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u.user, Extra: u.extra}}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	return n
}

func agentPod(name, uid, node, sa string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "berth-system", UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa}}
}

func TestAuthenticateAndAuthorize(t *testing.T) {
	tokens := map[string]tokenUser{
		"good":        agentUser("berth-system:berth-agent", "agent-a", "uid-a", "node-a"),
		"other-sa":    agentUser("berth-system:default", "agent-x", "uid-x", "node-a"),
		"other-ns":    agentUser("kube-system:berth-agent", "agent-y", "uid-y", "node-a"),
		"user":        {user: "alice"},
		"unbound":     {user: "system:serviceaccount:berth-system:berth-agent"},
		"no-node":     agentUser("berth-system:berth-agent", "agent-b", "uid-b", ""),
		"no-node-old": agentUser("berth-system:berth-agent", "agent-c", "uid-c-old", ""),
		"no-node-sa":  agentUser("berth-system:berth-agent", "agent-d", "uid-d", ""),
	}
	tests := []struct {
		name   string
		token  string
		node   string
		status int // 0 = accepted
		reason string
	}{
		{"right identity", "good", "node-a", 0, ""},
		{"wrong node", "good", "node-b", http.StatusForbidden, ReasonWrongNode},
		{"wrong service account", "other-sa", "node-a", http.StatusForbidden, ReasonWrongSA},
		{"right name, wrong namespace", "other-ns", "node-a", http.StatusForbidden, ReasonWrongSA},
		{"not a service account", "user", "node-a", http.StatusForbidden, ReasonWrongSA},
		{"token not bound to a pod", "unbound", "node-a", http.StatusForbidden, ReasonWrongNode},
		{"invalid token", "forged", "node-a", http.StatusUnauthorized, ReasonInvalidToken},
		// Without node info in the token the pod is looked up.
		{"pod lookup, right node", "no-node", "node-b", 0, ""},
		{"pod lookup, wrong node", "no-node", "node-a", http.StatusForbidden, ReasonWrongNode},
		{"pod lookup, pod replaced (UID differs)", "no-node-old", "node-c", http.StatusForbidden, ReasonWrongNode},
		{"pod lookup, pod runs as another SA", "no-node-sa", "node-d", http.StatusForbidden, ReasonWrongSA},
	}
	cs := fake.NewClientset(agentPod("agent-b", "uid-b", "node-b", "berth-agent"),
		agentPod("agent-c", "uid-c-new", "node-c", "berth-agent"), agentPod("agent-d", "uid-d", "node-d", "default"))
	fakeReviews(cs, tokens, nil)
	a, err := NewAuthenticator(cs, []string{"berth-system/berth-agent"}, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			id, err := a.Authenticate(ctx, tc.token)
			if err == nil {
				err = a.Authorize(ctx, id, tc.node)
			}
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Status != tc.status || ae.Reason != tc.reason {
				t.Fatalf("err = %v, want %d %s", err, tc.status, tc.reason)
			}
		})
	}
}

func TestAuthenticateCacheAndOutage(t *testing.T) {
	cs := fake.NewClientset()
	reviews := fakeReviews(cs, map[string]tokenUser{"good": agentUser("ns:sa", "p", "u", "n")}, nil)
	a, err := NewAuthenticator(cs, []string{"ns/sa"}, nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if _, err := a.Authenticate(context.Background(), "good"); err != nil {
			t.Fatal(err)
		}
	}
	if *reviews != 1 {
		t.Fatalf("%d TokenReviews for 3 pushes within the TTL, want 1", *reviews)
	}
	for i := 0; i < 2; i++ {
		a.Authenticate(context.Background(), "bad")
	}
	if *reviews != 3 {
		t.Fatalf("%d reviews: failed reviews must not be cached", *reviews)
	}
	now = now.Add(61 * time.Second)
	a.Authenticate(context.Background(), "good")
	if *reviews != 4 {
		t.Fatalf("%d reviews: an expired entry must be reviewed again", *reviews)
	}

	down := fake.NewClientset()
	fakeReviews(down, nil, errors.New("connection refused"))
	b, _ := NewAuthenticator(down, []string{"ns/sa"}, nil, nil, 0)
	_, err = b.Authenticate(context.Background(), "good")
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("API server outage gave %v, want 503 so the agent retries", err)
	}

	for _, bad := range [][]string{nil, {"no-slash"}, {"a/b/c"}, {"/x"}} {
		if _, err := NewAuthenticator(cs, bad, nil, nil, 0); err == nil {
			t.Errorf("service accounts %q accepted", bad)
		}
	}
}
