// Package reach is the plumbing every `kubectl berth` verb shares to reach Berth's running
// components: the caller's kubeconfig, the scheduler's leader from its Lease, a port-forward
// through the API server to a pod (so the caller's own credentials, checked by the API server,
// are what opens the tunnel), and an HTTP client presenting those credentials to the
// scheduler's secure port. kubectl berth explain (cmd/kubectl-berth) and pkg/berthctl both use it; neither copies it.
package reach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/transport/spdy"
)

// Kube is the caller's connection to the API server.
type Kube struct {
	Config *rest.Config
	// Namespace is the kubeconfig context's namespace (default when it names none).
	Namespace string
	Client    kubernetes.Interface
}

// Connect loads the kubeconfig (explicit path, else $KUBECONFIG or ~/.kube/config) with the
// given context.
func Connect(kubeconfig, kubeContext string) (*Kube, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := kc.Namespace()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{Config: cfg, Namespace: ns, Client: client}, nil
}

// FindLease returns the first Lease called name in namespaces, in order. A namespace without it
// is skipped; none having it is an error saying where it looked.
func FindLease(ctx context.Context, client kubernetes.Interface, namespaces []string, name string) (*coordinationv1.Lease, error) {
	for _, ns := range namespaces {
		l, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading Lease %s/%s: %w", ns, name, err)
		}
		return l, nil
	}
	return nil, &NoLeaseError{Name: name, Namespaces: namespaces}
}

// NoLeaseError: no namespace searched holds the Lease.
type NoLeaseError struct {
	Name       string
	Namespaces []string
}

func (e *NoLeaseError) Error() string {
	return fmt.Sprintf("no Lease %q in %s: is berth-scheduler running with leader election? (--lease, --scheduler-namespace, or --scheduler-url)", e.Name, strings.Join(e.Namespaces, " or "))
}

// ExpiredLeaseError: the Lease's holder stopped renewing it.
type ExpiredLeaseError struct {
	Namespace, Name, Holder string
	Expired                 time.Time
}

func (e *ExpiredLeaseError) Error() string {
	return fmt.Sprintf("Lease %s/%s of %q expired at %s: no scheduler is leading now", e.Namespace, e.Name, e.Holder, e.Expired.UTC().Format(time.RFC3339))
}

// Holder returns the Lease's current holder, or an error when nobody holds it or the holder's
// term ran out (as of now).
func Holder(l *coordinationv1.Lease, now time.Time) (string, error) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", fmt.Errorf("Lease %s/%s has no holder: no scheduler is leading (is berth-scheduler running?)", l.Namespace, l.Name)
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		end := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		if now.After(end) {
			return "", &ExpiredLeaseError{Namespace: l.Namespace, Name: l.Name, Holder: *l.Spec.HolderIdentity, Expired: end}
		}
	}
	return *l.Spec.HolderIdentity, nil
}

// LeaderPod reads the pod a Lease holder identity names (client-go's identity is
// "<pod>_<uid>") and checks that it is Running.
func LeaderPod(ctx context.Context, client kubernetes.Interface, ns, lease, holder string) (*corev1.Pod, error) {
	podName, _, _ := strings.Cut(holder, "_")
	pod, err := client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the leader %q of Lease %s/%s is not a pod in %s (a scheduler running outside the cluster?): pass --scheduler-url https://HOST:PORT", holder, ns, lease, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the leader pod %s/%s: %w", ns, podName, err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return nil, fmt.Errorf("the leader pod %s/%s is %s, not Running", ns, podName, pod.Status.Phase)
	}
	return pod, nil
}

// PortForward opens a tunnel through the API server to port of pod and returns the local
// port on 127.0.0.1 and the function that closes the tunnel.
func PortForward(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, pod *corev1.Pod, port int) (int, func(), error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return 0, nil, err
	}
	u := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stopCh, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stopCh, ready, io.Discard, &errOut)
	if err != nil {
		return 0, nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	stop := func() { close(stopCh) }
	select {
	case <-ready:
	case err := <-failed:
		return 0, nil, fmt.Errorf("port-forward to %s/%s:%d: %v %s", pod.Namespace, pod.Name, port, err, errOut.String())
	case <-ctx.Done():
		stop()
		return 0, nil, fmt.Errorf("port-forward to %s/%s:%d: %w", pod.Namespace, pod.Name, port, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		stop()
		return 0, nil, fmt.Errorf("port-forward to %s/%s: no local port: %v", pod.Namespace, pod.Name, err)
	}
	return int(ports[0].Local), stop, nil
}

// TLS says how to check the scheduler's serving certificate.
type TLS struct {
	// CAFile verifies it; Insecure does not.
	CAFile   string
	Insecure bool
	// Forwarded: the address is a port-forward (through the API server to the pod), where
	// verification is skipped unless CAFile is set: berth-scheduler serves a self-signed
	// certificate unless given one.
	Forwarded bool
}

// HTTPClient presents the caller's own credentials (client certificate, token, exec plugin)
// to the scheduler, which checks them with TokenReview/SubjectAccessReview like /metrics.
func HTTPClient(cfg *rest.Config, t TLS, timeout time.Duration) (*http.Client, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	// The API server's CA does not sign the scheduler's serving certificate.
	tc.TLS.CAData, tc.TLS.CAFile, tc.TLS.ServerName = nil, "", ""
	switch {
	case t.CAFile != "":
		if _, err := os.Stat(t.CAFile); err != nil {
			return nil, fmt.Errorf("--scheduler-ca: %w", err)
		}
		tc.TLS.CAFile, tc.TLS.Insecure = t.CAFile, false
	case t.Insecure || t.Forwarded:
		tc.TLS.Insecure = true
	default:
		return nil, fmt.Errorf("--scheduler-url needs --scheduler-ca (the CA of the scheduler's serving certificate) or --insecure-skip-tls-verify: your credentials would go to an unverified server")
	}
	rt, err := transport.New(tc)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: timeout}, nil
}

// Scheduler is how a command reaches berth-scheduler's secure port: the leader found by its
// Lease and port-forwarded through the API server (the default), or a URL the caller can reach.
type Scheduler struct {
	// URL (https://host:port) skips the Lease and the port-forward.
	URL string
	// Namespaces are searched in order for the Lease named Lease.
	Namespaces []string
	Lease      string
	// Port is the scheduler pod's secure port.
	Port int
	// CAFile verifies the scheduler's certificate; Insecure skips verification. Through the
	// port-forward verification is skipped unless CAFile is set (berth-scheduler serves a
	// self-signed certificate unless given one; the tunnel itself is the API server's).
	CAFile   string
	Insecure bool
	Timeout  time.Duration
	// ExpiredNote is added to the error when the Lease has expired (what that means for the
	// command).
	ExpiredNote string
}

// Open returns the base URL of the scheduler to ask, a description of it, a client that
// presents the caller's own credentials, and a stop function for the port-forward.
func (s Scheduler) Open(ctx context.Context, cfg *rest.Config, client kubernetes.Interface) (string, string, *http.Client, func(), error) {
	hc, err := HTTPClient(cfg, TLS{CAFile: s.CAFile, Insecure: s.Insecure, Forwarded: s.URL == ""}, s.Timeout)
	if err != nil {
		return "", "", nil, nil, err
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return "", "", nil, nil, fmt.Errorf("--scheduler-url %q: want https://host:port", s.URL)
		}
		return strings.TrimSuffix(s.URL, "/"), "scheduler " + u.Host, hc, func() {}, nil
	}
	ns, holder, err := s.Leader(ctx, client)
	if err != nil {
		return "", "", nil, nil, err
	}
	pod, err := LeaderPod(ctx, client, ns, s.Lease, holder)
	if err != nil {
		return "", "", nil, nil, err
	}
	local, stop, err := PortForward(ctx, cfg, client, pod, s.Port)
	if err != nil {
		return "", "", nil, nil, err
	}
	return fmt.Sprintf("https://127.0.0.1:%d", local), fmt.Sprintf("leader pod %s/%s", ns, pod.Name), hc, stop, nil
}

// Leader reads the Lease and returns its namespace and holder identity.
func (s Scheduler) Leader(ctx context.Context, client kubernetes.Interface) (string, string, error) {
	l, err := FindLease(ctx, client, s.Namespaces, s.Lease)
	if err != nil {
		return "", "", err
	}
	holder, err := Holder(l, time.Now())
	var expired *ExpiredLeaseError
	if errors.As(err, &expired) && s.ExpiredNote != "" {
		err = fmt.Errorf("%w, %s", err, s.ExpiredNote)
	}
	if err != nil {
		return "", "", err
	}
	return l.Namespace, holder, nil
}
