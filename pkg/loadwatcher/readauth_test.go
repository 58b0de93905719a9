package loadwatcher

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAccess installs a SubjectAccessReview reactor answering from grants ("user" or
// "user/subresource" allowed); it returns a counter of reviews made and records the last spec.
func fakeAccess(cs *fake.Clientset, grants map[string]bool, last *authzv1.SubjectAccessReviewSpec) *int {
	n := new(int)
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*n++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		if last != nil {
			*last = sar.Spec
		}
		ra := sar.Spec.ResourceAttributes
		key := sar.Spec.User
		if ra.Subresource != "" {
			key += "/" + ra.Subresource
		}
		ok := ra.Group == ReadGroup && ra.Resource == ReadResource && ra.Verb == ReadVerb && grants[key]
		sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: ok}
		if !ok {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	return n
}

// TestReadAuthorization is the decision table of GET /watcher: who reads node load and pod
// lists, who is refused, with which status and counted reason.
func TestReadAuthorization(t *testing.T) {
	const (
		scheduler = "system:serviceaccount:berth-system:berth-scheduler"
		berthctl  = "system:serviceaccount:berth-system:berth-berthctl"
		tenant    = "system:serviceaccount:red:default"
	)
	tokens := map[string]tokenUser{
		"scheduler": {user: scheduler}, "berthctl": {user: berthctl}, "tenant": {user: tenant},
	}
	grants := map[string]bool{scheduler: true, scheduler + "/pods": true, berthctl: true}
	tests := []struct {
		name      string
		anonymous bool
		header    string // "Authorization: ..." or "X-...: ...", several separated by "\n"
		path      string
		status    int
		reason    string // counted reason when refused
		inBody    string
	}{
		{"no token", false, "", "/watcher", 401, ReasonReadNoToken, "needs a bearer token"},
		{"no token, pod lists", false, "", "/watcher?pods=true", 401, ReasonReadNoToken, "nodeloads/pods.berth.dev"},
		{"no token, one node", false, "", "/watcher/node-a", 401, ReasonReadNoToken, ""},
		{"no token, upstream per-host form", false, "", "/watcher?host=node-a", 401, ReasonReadNoToken, ""},
		{"basic auth is not a token", false, "Authorization: Basic dTpw", "/watcher", 401, ReasonReadNoToken, ""},
		{"bad token", false, "Authorization: Bearer forged", "/watcher", 401, ReasonInvalidToken, "invalid bearer token"},
		{"wrong identity", false, "Authorization: Bearer tenant", "/watcher?pods=true", 403, ReasonReadForbidden, `"system:serviceaccount:red:default" may not get nodeloads/pods.berth.dev`},
		{"wrong identity, node load only", false, "Authorization: Bearer tenant", "/watcher", 403, ReasonReadForbidden, "may not get nodeloads.berth.dev"},
		{"wrong identity, bad pods value checked as pod lists", false, "Authorization: Bearer tenant", "/watcher?pods=maybe", 403, ReasonReadForbidden, "nodeloads/pods"},
		{"allowed identity", false, "Authorization: Bearer scheduler", "/watcher?pods=true", 200, "", "berthNodes"},
		{"allowed identity, one node", false, "Authorization: Bearer scheduler", "/watcher/node-a", 200, "", "node-a"},
		{"allowed identity through the service proxy's header", false, ReadTokenHeader + ": Bearer scheduler", "/watcher", 200, "", "berthNodes"},
		{"node load granted, pod lists not", false, ReadTokenHeader + ": Bearer berthctl", "/watcher?pods=true", 403, ReasonReadForbidden, "nodeloads/pods"},
		{"node load granted", false, ReadTokenHeader + ": Bearer berthctl", "/watcher", 200, "", "berthNodes"},
		// Berth's typed form is the same read, under the same checks.
		{"typed form, no token", false, typedAccept, "/watcher?pods=true", 401, ReasonReadNoToken, "nodeloads/pods.berth.dev"},
		{"typed form, wrong identity", false, "Authorization: Bearer tenant\n" + typedAccept, "/watcher", 403, ReasonReadForbidden, "may not get nodeloads.berth.dev"},
		{"typed form, node load granted, pod lists not", false, ReadTokenHeader + ": Bearer berthctl\n" + typedAccept, "/watcher?pods=true", 403, ReasonReadForbidden, "nodeloads/pods"},
		{"typed form, allowed identity", false, "Authorization: Bearer scheduler\n" + typedAccept, "/watcher?pods=true", 200, "", `"nodes":{"node-a":`},
		{"typed form, allowed identity, one node", false, "Authorization: Bearer scheduler\n" + typedAccept, "/watcher/node-a", 200, "", `"cpu":{"avg":30`},
		{"anonymous switch: no token", true, "", "/watcher?pods=true", 200, "", "podUIDs"},
		{"anonymous switch: any token", true, "Authorization: Bearer forged", "/watcher", 200, "", "berthNodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			cs := fake.NewClientset()
			fakeReviews(cs, tokens, nil)
			fakeAccess(cs, grants, nil)
			e.srv.Reads = NewReadAuthorizer(cs, NewTokenReviewer(cs, nil, time.Minute))
			e.srv.Reads.Anonymous = tc.anonymous
			if code, body := e.post(t, "tok-a", reportFor("node-a", e.now, 30)); code != http.StatusNoContent {
				t.Fatalf("report: %d %s", code, body)
			}
			req, _ := http.NewRequest(http.MethodGet, e.http.URL+tc.path, nil)
			for _, h := range strings.Split(tc.header, "\n") {
				if k, v, ok := strings.Cut(h, ": "); ok {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.inBody) {
				t.Fatalf("GET %s: %d %q, want %d containing %q", tc.path, resp.StatusCode, body, tc.status, tc.inBody)
			}
			refused := testutil.CollectAndCount(e.srv.ReadsRefused())
			switch {
			case tc.reason == "" && refused != 0:
				t.Fatalf("allowed read counted as refused")
			case tc.reason != "":
				if got := testutil.ToFloat64(e.srv.ReadsRefused().WithLabelValues(tc.reason)); got != 1 {
					t.Fatalf("reads_refused_total{reason=%q} = %v, want 1", tc.reason, got)
				}
				if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
					t.Fatal("401 without WWW-Authenticate")
				}
				if strings.Contains(string(body), "node-a") {
					t.Fatalf("refusal leaks the document: %s", body)
				}
			}
		})
	}
}

// TestReadAuthorizationCacheAndOutage: one TokenReview and one SubjectAccessReview per reader
// per TTL (the scheduler polls every few seconds per plugin), denials kept only briefly, and an
// API server outage is a 503 (the caller retries), not a 403.
func TestReadAuthorizationCacheAndOutage(t *testing.T) {
	cs := fake.NewClientset()
	reviews := fakeReviews(cs, map[string]tokenUser{"r": {user: "reader"}, "t": {user: "tenant"}}, nil)
	grants := map[string]bool{"reader": true}
	var last authzv1.SubjectAccessReviewSpec
	sars := fakeAccess(cs, grants, &last)
	rv := NewTokenReviewer(cs, []string{"berth-loadwatcher"}, time.Minute)
	now := time.Unix(1000, 0)
	rv.now = func() time.Time { return now }
	a := NewReadAuthorizer(cs, rv)
	get := func(tok string) error {
		r := httptest.NewRequest(http.MethodGet, "/watcher", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return a.AuthorizeRead(context.Background(), r, false)
	}
	for i := 0; i < 5; i++ {
		if err := get("r"); err != nil {
			t.Fatal(err)
		}
	}
	if *reviews != 1 || *sars != 1 {
		t.Fatalf("%d TokenReviews and %d SubjectAccessReviews for 5 reads in the TTL, want 1 and 1", *reviews, *sars)
	}
	if last.User != "reader" || last.ResourceAttributes == nil || last.ResourceAttributes.Subresource != "" {
		t.Fatalf("SubjectAccessReview asked %+v", last)
	}
	if err := get("t"); err == nil {
		t.Fatal("tenant allowed")
	}
	// A role bound to the tenant takes effect after the short denial TTL, not the full one.
	grants["tenant"] = true
	now = now.Add(11 * time.Second)
	if err := get("t"); err != nil {
		t.Fatalf("tenant still refused 11 s after the grant: %v", err)
	}

	down := fake.NewClientset()
	fakeReviews(down, map[string]tokenUser{"r": {user: "reader"}}, nil)
	down.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	b := NewReadAuthorizer(down, NewTokenReviewer(down, nil, 0))
	r := httptest.NewRequest(http.MethodGet, "/watcher", nil)
	r.Header.Set("Authorization", "Bearer r")
	var ae *AuthError
	if err := b.AuthorizeRead(context.Background(), r, true); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("API server outage gave %v, want 503", err)
	}
}
