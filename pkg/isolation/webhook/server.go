package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CertManagement says who issues the serving certificate.
type CertManagement string

const (
	// CertsByOperator: the operator generates and rotates its CA and serving certificate in
	// the Secret and injects the CA bundle into the MutatingWebhookConfiguration.
	CertsByOperator CertManagement = "operator"
	// CertsExternal: something else (cert-manager) writes tls.crt/tls.key into the Secret and
	// the caBundle; the operator only serves what is there and reloads it when it changes.
	CertsExternal CertManagement = "external"
)

// Options run the webhook inside the operator.
type Options struct {
	Config Config
	// BindAddress of the HTTPS server (default :9443).
	BindAddress string
	MaxBody     int64
	// SecretNamespace/SecretName hold the serving certificate (and, with CertsByOperator, the
	// CA). The chart creates the Secret empty so RBAC can name it (create cannot be
	// restricted by name).
	SecretNamespace, SecretName string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose webhooks get the CA
	// bundle (CertsByOperator).
	WebhookConfiguration string
	CertManagement       CertManagement
	Certs                CertOptions
	// SyncInterval: how often the Secret is re-read (rotation, reload, re-injection).
	SyncInterval time.Duration
	// GracefulShutdown bounds in-flight requests at stop.
	GracefulShutdown time.Duration
}

// Server serves the webhook and keeps its certificate current. It runs on every operator
// replica (not only the leader): the webhook Service sends requests to any ready replica.
// Rotation needs no leader either: Secret updates carry the resourceVersion they were
// computed from, so of two replicas renewing at once one wins and the other re-reads.
type Server struct {
	o       Options
	client  kubernetes.Interface
	log     logr.Logger
	handler *Handler
	now     func() time.Time

	cert     atomic.Pointer[tls.Certificate]
	mu       sync.Mutex
	lastErr  error
	listener net.Listener
	// afterLoad is called when a certificate was loaded (tests).
	afterLoad func(*tls.Certificate)
}

// New checks o and builds the server.
func New(o Options, client kubernetes.Interface, log logr.Logger, h *Handler) (*Server, error) {
	if errs := o.Config.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("instance-isolation webhook: %w", errs.ToAggregate())
	}
	if o.BindAddress == "" {
		o.BindAddress = ":9443"
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = time.Minute
	}
	if o.GracefulShutdown <= 0 {
		o.GracefulShutdown = 10 * time.Second
	}
	if o.SecretNamespace == "" || o.SecretName == "" {
		return nil, errors.New("instance-isolation webhook: the serving Secret's namespace and name are required")
	}
	switch o.CertManagement {
	case CertsByOperator:
		if o.WebhookConfiguration == "" {
			return nil, errors.New("instance-isolation webhook: operator-managed certificates need the MutatingWebhookConfiguration's name (to inject the CA bundle)")
		}
		if len(o.Certs.Hosts) == 0 {
			return nil, errors.New("instance-isolation webhook: operator-managed certificates need the hosts to issue them for")
		}
		if o.Certs.CertValidity < 10*time.Second || o.Certs.CAValidity < o.Certs.CertValidity {
			return nil, fmt.Errorf("instance-isolation webhook: certificate validity %s must be at least 10s and at most the CA validity %s", o.Certs.CertValidity, o.Certs.CAValidity)
		}
	case CertsExternal:
	default:
		return nil, fmt.Errorf("instance-isolation webhook: certificate management %q: want %q or %q", o.CertManagement, CertsByOperator, CertsExternal)
	}
	if h == nil {
		h = &Handler{}
	}
	h.Config, h.Log = o.Config, log.WithName("admission")
	if h.MaxBody == 0 {
		h.MaxBody = o.MaxBody
	}
	return &Server{o: o, client: client, log: log, handler: h, now: time.Now}, nil
}

// NeedLeaderElection: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Ready is the operator's readyz check: a valid certificate is loaded and the port is open.
func (s *Server) Ready(*http.Request) error {
	s.mu.Lock()
	l, last := s.listener, s.lastErr
	s.mu.Unlock()
	c := s.cert.Load()
	switch {
	case l == nil:
		return errors.New("instance-isolation webhook: not listening yet")
	case c == nil:
		return fmt.Errorf("instance-isolation webhook: no serving certificate yet (last sync: %v)", last)
	case !s.now().Before(c.Leaf.NotAfter):
		return fmt.Errorf("instance-isolation webhook: serving certificate expired at %s (last sync: %v)", c.Leaf.NotAfter.UTC().Format(time.RFC3339), last)
	}
	return nil
}

// Start serves until ctx ends (a manager.Runnable).
func (s *Server) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", s.o.BindAddress)
	if err != nil {
		return fmt.Errorf("instance-isolation webhook: listening on %s: %w", s.o.BindAddress, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	mux := http.NewServeMux()
	mux.Handle(Path, s.handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		// why: the API server speaks TLS 1.2+; a handshake before the first certificate is
		// loaded fails with a named reason instead of a generic one.
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.cert.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate loaded yet")
		}},
	}
	s.log.Info("serving", "address", l.Addr().String(), "path", Path, "mode", s.o.Config.Mode, "certificates", s.o.CertManagement)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(l, "", "") }()

	t := time.NewTimer(s.syncLogged(ctx))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), s.o.GracefulShutdown)
			defer cancel()
			err := srv.Shutdown(sctx)
			<-served
			s.log.Info("stopped")
			return err
		case err := <-served:
			return fmt.Errorf("instance-isolation webhook: serving: %w", err)
		case <-t.C:
			t.Reset(s.syncLogged(ctx))
		}
	}
}

// syncLogged runs Sync and returns when to run it next: after a failure (the webhook
// configuration not created yet at install, a conflict with another replica, the API server
// briefly away) within 5 s rather than a whole interval.
func (s *Server) syncLogged(ctx context.Context) time.Duration {
	err := s.Sync(ctx)
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
	if err == nil {
		return s.o.SyncInterval
	}
	next := min(s.o.SyncInterval, 5*time.Second)
	if ctx.Err() == nil {
		s.log.Error(err, "certificate sync failed; retrying", "in", next)
	}
	return next
}

// Sync reads the Secret, renews what is due (operator-managed), makes sure the webhook
// configuration trusts the bundle and serves the Secret's certificate.
func (s *Server) Sync(ctx context.Context) error {
	secrets := s.client.CoreV1().Secrets(s.o.SecretNamespace)
	sec, err := secrets.Get(ctx, s.o.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if s.o.CertManagement == CertsExternal {
			return fmt.Errorf("Secret %s/%s not found: waiting for the certificate issuer (cert-manager) to write it", s.o.SecretNamespace, s.o.SecretName)
		}
		sec, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.o.SecretName, Namespace: s.o.SecretNamespace}}, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("Secret %s/%s not found and not allowed to create it (the chart creates it empty): %w", s.o.SecretNamespace, s.o.SecretName, err)
		}
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s: %w", s.o.SecretNamespace, s.o.SecretName, err)
	}
	data := sec.Data
	if s.o.CertManagement == CertsByOperator {
		now := s.now()
		next, why, err := Ensure(sec.Data, s.o.Certs, now)
		if err != nil {
			return fmt.Errorf("issuing certificates: %w", err)
		}
		// why: inject first, store second. Replicas serve only what the Secret holds, so
		// the API server trusts a new CA before any replica presents a certificate from it.
		if err := s.inject(ctx, next[KeyCABundle]); err != nil {
			return err
		}
		if len(why) > 0 {
			upd := sec.DeepCopy()
			upd.Data = next
			if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("storing renewed certificates in Secret %s/%s (%v): %w", s.o.SecretNamespace, s.o.SecretName, why, err)
			}
			s.log.Info("certificates renewed", "why", why)
			// why: the renewed certificate is served from the next sync on, giving the API
			// server's informer a sync interval to see the injected bundle — unless nothing
			// valid is being served now, when there is nothing to wait for.
			if c := s.cert.Load(); c != nil && now.Before(c.Leaf.NotAfter) {
				return nil
			}
			data = next
		}
	}
	return s.load(data)
}

func (s *Server) load(data map[string][]byte) error {
	m, err := Load(data, s.now())
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", s.o.SecretNamespace, s.o.SecretName, err)
	}
	if old := s.cert.Load(); old != nil && bytes.Equal(old.Certificate[0], m.Leaf.Certificate[0]) {
		return nil
	}
	s.cert.Store(&m.Leaf)
	s.log.Info("serving certificate loaded", "serial", m.Leaf.Leaf.SerialNumber.Text(16), "notAfter", m.Leaf.Leaf.NotAfter.UTC().Format(time.RFC3339),
		"issuer", m.Leaf.Leaf.Issuer.CommonName)
	if s.afterLoad != nil {
		s.afterLoad(&m.Leaf)
	}
	return nil
}

// inject writes bundle into every webhook of the configuration that lacks it. The
// configuration is the chart's; RBAC lets the operator get and update this one name only.
func (s *Server) inject(ctx context.Context, bundle []byte) error {
	api := s.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cfg, err := api.Get(ctx, s.o.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading MutatingWebhookConfiguration %s to inject the CA bundle: %w", s.o.WebhookConfiguration, err)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
			cfg.Webhooks[i].ClientConfig.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if _, err := api.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("injecting the CA bundle into MutatingWebhookConfiguration %s: %w", s.o.WebhookConfiguration, err)
	}
	s.log.Info("CA bundle injected", "configuration", s.o.WebhookConfiguration, "webhooks", len(cfg.Webhooks), "cas", len(parseCerts(bundle)))
	return nil
}
