package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	testNS  = "berth-system"
	testSec = "berth-isolation-webhook-tls"
	testMWC = "berth-instance-isolation"
)

func newTestServer(t *testing.T, certs CertManagement, objs ...any) (*Server, *fake.Clientset, *time.Time) {
	t.Helper()
	cs := fake.NewClientset()
	_, _ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testMWC},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "a.isolation.berth.dev"}, {Name: "b.isolation.berth.dev"}},
	}, metav1.CreateOptions{})
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			_, _ = cs.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
		}
	}
	s, err := New(Options{Config: cfg(ModeBerth), SecretNamespace: testNS, SecretName: testSec, WebhookConfiguration: testMWC,
		CertManagement: certs, Certs: CertOptions{Hosts: []string{"berth-webhook.berth-system.svc", "127.0.0.1"}, CAValidity: 90 * time.Minute, CertValidity: 30 * time.Minute}},
		cs, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	return s, cs, &now
}

func secretData(t *testing.T, cs *fake.Clientset) map[string][]byte {
	t.Helper()
	sec, err := cs.CoreV1().Secrets(testNS).Get(context.Background(), testSec, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec.Data
}

func bundles(t *testing.T, cs *fake.Clientset) [][]byte {
	t.Helper()
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), testMWC, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range mwc.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// verifies: the served certificate chains to the bundle the webhook configuration holds, for
// the Service name, at now — what the API server checks.
func verifies(t *testing.T, s *Server, cs *fake.Clientset, now time.Time) {
	t.Helper()
	c := s.cert.Load()
	if c == nil {
		t.Fatal("no certificate served")
	}
	for i, b := range bundles(t, cs) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			t.Fatalf("webhook %d: no CA bundle injected", i)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "berth-webhook.berth-system.svc", CurrentTime: now}); err != nil {
			t.Fatalf("webhook %d: served certificate does not verify against the injected bundle: %v", i, err)
		}
	}
}

// TestSyncIssuesRotatesAndInjects drives the certificate loop with a fake clock through a
// first issue, serving-certificate renewals and a CA renewal: at every step the certificate
// being served verifies against the injected bundle, and a renewed CA stays trusted until it
// expires.
func TestSyncIssuesRotatesAndInjects(t *testing.T) {
	s, cs, now := newTestServer(t, CertsByOperator)
	ctx := context.Background()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(nil); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Fatalf("ready before listening: %v", err)
	}
	verifies(t, s, cs, *now)
	first := s.cert.Load().Leaf
	// Nothing due: nothing changes.
	*now = now.Add(time.Minute)
	if err := s.Sync(ctx); err != nil || !s.cert.Load().Leaf.Equal(first) {
		t.Fatalf("sync with nothing due changed the certificate: %v", err)
	}
	seen := map[string]bool{first.SerialNumber.String(): true}
	cas := map[string]bool{first.Issuer.CommonName: true}
	maxBundle := 1
	// 4 hours in 1-minute steps: the 30 min certificate renews about every 20 min, the 90 min
	// CA about every hour.
	for i := 0; i < 240; i++ {
		*now = now.Add(time.Minute)
		if err := s.Sync(ctx); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		verifies(t, s, cs, *now)
		leaf := s.cert.Load().Leaf
		seen[leaf.SerialNumber.String()] = true
		cas[leaf.Issuer.CommonName] = true
		if n := len(parseCerts(bundles(t, cs)[0])); n > maxBundle {
			maxBundle = n
		}
	}
	if len(seen) < 10 || len(cas) < 3 {
		t.Fatalf("%d serving certificates and %d CAs in 4 h, want >= 10 and >= 3", len(seen), len(cas))
	}
	if maxBundle != 2 {
		t.Fatalf("bundle held at most %d CAs, want 2 while a CA is renewed", maxBundle)
	}
	// The Secret holds what is served.
	pair, err := tls.X509KeyPair(secretData(t, cs)[KeyCert], secretData(t, cs)[KeyKey])
	if err != nil || !pair.Leaf.Equal(s.cert.Load().Leaf) {
		t.Fatalf("secret and served certificate differ: %v", err)
	}
}

// TestSyncRepairs: an expired serving certificate, an expired CA, garbage in the Secret and a
// caBundle reset by someone else (helm upgrade) are repaired on the next sync.
func TestSyncRepairs(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, s *Server, cs *fake.Clientset, now *time.Time)
	}{
		{"expired serving certificate", func(t *testing.T, s *Server, cs *fake.Clientset, now *time.Time) {
			*now = now.Add(31 * time.Minute)
		}},
		{"expired CA", func(t *testing.T, s *Server, cs *fake.Clientset, now *time.Time) {
			*now = now.Add(2 * time.Hour)
		}},
		{"garbage", func(t *testing.T, s *Server, cs *fake.Clientset, now *time.Time) {
			sec, _ := cs.CoreV1().Secrets(testNS).Get(context.Background(), testSec, metav1.GetOptions{})
			sec.Data = map[string][]byte{KeyCert: []byte("junk"), KeyKey: []byte("junk"), KeyCACert: []byte("junk")}
			_, _ = cs.CoreV1().Secrets(testNS).Update(context.Background(), sec, metav1.UpdateOptions{})
			s.cert.Store(nil)
		}},
		{"bundle wiped", func(t *testing.T, s *Server, cs *fake.Clientset, now *time.Time) {
			mwc, _ := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), testMWC, metav1.GetOptions{})
			mwc.Webhooks[1].ClientConfig.CABundle = nil
			_, _ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(context.Background(), mwc, metav1.UpdateOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, cs, now := newTestServer(t, CertsByOperator)
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			tc.prep(t, s, cs, now)
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			verifies(t, s, cs, *now)
		})
	}
}

// TestSyncExternal: with cert-manager the operator only serves the Secret's pair; an expired
// or missing one is a named error, never an injected bundle.
func TestSyncExternal(t *testing.T) {
	s, cs, now := newTestServer(t, CertsExternal)
	if err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "cert-manager") {
		t.Fatalf("missing Secret: %v", err)
	}
	data, _, err := Ensure(nil, CertOptions{Hosts: []string{"x.svc"}, CAValidity: time.Hour, CertValidity: time.Hour}, *now)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = cs.CoreV1().Secrets(testNS).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testSec, Namespace: testNS},
		Data: map[string][]byte{KeyCert: data[KeyCert], KeyKey: data[KeyKey], "ca.crt": data[KeyCACert]}}, metav1.CreateOptions{})
	if err := s.Sync(context.Background()); err != nil || s.cert.Load() == nil {
		t.Fatalf("serving cert-manager's pair: %v", err)
	}
	if b := bundles(t, cs); len(b[0]) != 0 {
		t.Fatalf("external mode injected a bundle")
	}
	*now = now.Add(2 * time.Hour)
	if err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired external certificate: %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	base := Options{Config: cfg(ModeBerth), SecretNamespace: "ns", SecretName: "s", WebhookConfiguration: "w", CertManagement: CertsByOperator,
		Certs: CertOptions{Hosts: []string{"h"}, CAValidity: time.Hour, CertValidity: time.Minute}}
	for name, mod := range map[string]func(*Options){
		"no secret":   func(o *Options) { o.SecretName = "" },
		"no config":   func(o *Options) { o.WebhookConfiguration = "" },
		"no hosts":    func(o *Options) { o.Certs.Hosts = nil },
		"short cert":  func(o *Options) { o.Certs.CertValidity = time.Second },
		"CA < cert":   func(o *Options) { o.Certs.CAValidity = time.Second * 30; o.Certs.CertValidity = time.Minute },
		"bad mgmt":    func(o *Options) { o.CertManagement = "vault" },
		"invalid cfg": func(o *Options) { o.Config.Mode = "x" },
	} {
		o := base
		mod(&o)
		if _, err := New(o, fake.NewClientset(), logr.Discard(), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(base, fake.NewClientset(), logr.Discard(), nil); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

// TestStartRetriesAndServes: started before its webhook configuration exists (a fresh install),
// the server is not ready, retries within seconds rather than a sync interval, then answers
// AdmissionReviews over TLS with a certificate the injected bundle verifies; it stops cleanly.
func TestStartRetriesAndServes(t *testing.T) {
	cs := fake.NewClientset()
	s, err := New(Options{Config: cfg(ModeBerth), BindAddress: "127.0.0.1:0", SecretNamespace: testNS, SecretName: testSec,
		WebhookConfiguration: testMWC, CertManagement: CertsByOperator, SyncInterval: time.Hour,
		Certs: CertOptions{Hosts: []string{"127.0.0.1"}, CAValidity: time.Hour, CertValidity: time.Hour}}, cs, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := s.Ready(nil); err == nil || !strings.Contains(err.Error(), testMWC) {
		t.Fatalf("ready without its webhook configuration: %v", err)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testMWC}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.isolation.berth.dev"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(8 * time.Second)
	for s.Ready(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 8 s after the configuration appeared: %v", s.Ready(nil))
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundles(t, cs)[0])
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	s.mu.Lock()
	addr := s.listener.Addr().String()
	s.mu.Unlock()
	resp, err := client.Post("https://"+addr+Path, "application/json", bytes.NewReader(review(t, pod(classA, nil), nil)))
	if err != nil {
		t.Fatalf("TLS request verified by the injected bundle: %v", err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) == 0 {
		t.Fatalf("answer %+v: %v", out.Response, err)
	}
}
