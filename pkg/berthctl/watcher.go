package berthctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/pkg/berthctl/reach"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// WatcherLabel selects the load watcher's pods (the chart's berth.selector for the component).
const WatcherLabel = "app.kubernetes.io/name=berth-loadwatcher"

// DefaultWatcherPort is the load watcher's container port in the chart.
const DefaultWatcherPort = 2020

// NotBerthWatcherError: the address answered, but not as Berth's load watcher (an upstream
// paypal/load-watcher, another vendor's, or something else on the port).
type NotBerthWatcherError struct{ Who, Why string }

func (e *NotBerthWatcherError) Error() string {
	return fmt.Sprintf("%s is not Berth's load watcher (%s): kubectl berth reads the per-node freshness only Berth's watcher serves", e.Who, e.Why)
}

// ReaderAnnotation on the watcher's Service names the ServiceAccount (same namespace) whose
// token kubectl berth shows the watcher.
const ReaderAnnotation = "berth.dev/reader-service-account"

// Watcher is where the load watcher answers and what to call it in messages.
type Watcher struct {
	Base, Who string
	Client    *http.Client
	// Token is shown to the watcher: in loadapi.ReadTokenHeader through the service proxy
	// (which consumes Authorization), else in Authorization. Empty: none.
	Token string
	// Reader names the account the token is of, for messages.
	Reader string
	// Proxied: Base is the API server's service proxy, whose own refusals (RBAC, no
	// endpoints) come back as the status codes below.
	Proxied bool
}

// openWatcher returns the watcher at o.WatcherURL; else, by default, the watcher's Service
// through the API server's service proxy with the caller's credentials (RBAC get on
// services/proxy, narrowed to that Service by name: the chart's berthctl-reader Role); or,
// with o.WatcherPortForward, a port-forward to a Running watcher pod (pkg/berthctl/reach, as
// explain reaches the scheduler), for API servers that cannot reach Service endpoints. The
// returned function closes what was opened.
func (o Options) openWatcher(ctx context.Context, kube *reach.Kube) (*Watcher, func(), error) {
	w, stop, err := o.openWatcherAt(ctx, kube)
	if err != nil {
		return nil, nil, err
	}
	if err := o.readerToken(ctx, kube, w); err != nil {
		stop()
		return nil, nil, err
	}
	return w, stop, nil
}

// readerToken gets w a token the watcher can check. The API server's service proxy forwards no
// caller identity (it authenticates you with Authorization, deletes it and connects as nobody),
// and a client certificate cannot be forwarded at all; so instead of your own credential, the
// API server mints a short-lived token (10 minutes, the watcher's audience: useless against the
// API server) of the account the chart ships for this, if RBAC lets you (create on its
// serviceaccounts/token: the berthctl-reader Role). The account may read node load, not pod lists.
func (o Options) readerToken(ctx context.Context, kube *reach.Kube, w *Watcher) error {
	sa := o.WatcherReader
	if sa == "-" {
		return nil
	}
	if sa == "" {
		svcs, err := kube.Client.CoreV1().Services(o.BerthNamespace).List(ctx, metav1.ListOptions{LabelSelector: WatcherLabel})
		if err == nil {
			for _, s := range svcs.Items {
				if a := s.Annotations[ReaderAnnotation]; a != "" {
					sa = a
					break
				}
			}
		}
		if sa == "" {
			// No chart Service to ask (a --watcher-url of another installation, or an older
			// chart): read without a token; a watcher that needs one says so.
			return nil
		}
	}
	exp := int64(600)
	spec := authnv1.TokenRequestSpec{ExpirationSeconds: &exp}
	if o.WatcherTokenAudience != "" {
		spec.Audiences = []string{o.WatcherTokenAudience}
	}
	tr, err := kube.Client.CoreV1().ServiceAccounts(o.BerthNamespace).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not create a token of serviceaccount %s/%s (create on serviceaccounts/token there), which the load watcher needs to serve you: bind the chart's <release>-berthctl-reader Role in that namespace (kubectl -n %s create rolebinding <you>-berthctl --role=<release>-berthctl-reader --user=<you>)", o.BerthNamespace, sa, o.BerthNamespace)
	}
	if err != nil {
		return explainAPIError(err, fmt.Sprintf("create a token of serviceaccount %s/%s for the load watcher (--watcher-reader)", o.BerthNamespace, sa))
	}
	w.Token, w.Reader = tr.Status.Token, o.BerthNamespace+"/"+sa
	return nil
}

// openWatcherAt finds where the watcher answers (see openWatcher).
func (o Options) openWatcherAt(ctx context.Context, kube *reach.Kube) (*Watcher, func(), error) {
	hc := &http.Client{Timeout: o.Timeout}
	if o.WatcherURL != "" {
		u, err := url.Parse(o.WatcherURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("--watcher-url %q: want http://host:port", o.WatcherURL)
		}
		return &Watcher{Base: strings.TrimSuffix(o.WatcherURL, "/"), Who: "load watcher " + u.Host, Client: hc}, func() {}, nil
	}
	if !o.WatcherPortForward {
		svcs, err := kube.Client.CoreV1().Services(o.BerthNamespace).List(ctx, metav1.ListOptions{LabelSelector: WatcherLabel})
		if err != nil {
			return nil, nil, explainAPIError(err, "list services in "+o.BerthNamespace+" (to find the load watcher)")
		}
		if len(svcs.Items) == 0 {
			return nil, nil, fmt.Errorf("no load watcher Service (%s) in namespace %s: is Berth installed there? (--berth-namespace, or --watcher-url http://HOST:PORT)", WatcherLabel, o.BerthNamespace)
		}
		svc := svcs.Items[0]
		port := "http"
		if len(svc.Spec.Ports) > 0 && svc.Spec.Ports[0].Name != "" {
			port = svc.Spec.Ports[0].Name
		}
		u := kube.Client.CoreV1().RESTClient().Get().Namespace(svc.Namespace).Resource("services").Name("http:" + svc.Name + ":" + port).SubResource("proxy").URL()
		api, err := rest.HTTPClientFor(kube.Config)
		if err != nil {
			return nil, nil, err
		}
		api.Timeout = o.Timeout
		return &Watcher{Base: strings.TrimSuffix(u.String(), "/"), Who: fmt.Sprintf("load watcher service %s/%s", svc.Namespace, svc.Name), Client: api, Proxied: true}, func() {}, nil
	}
	pods, err := kube.Client.CoreV1().Pods(o.BerthNamespace).List(ctx, metav1.ListOptions{LabelSelector: WatcherLabel})
	if err != nil {
		return nil, nil, explainAPIError(err, "list pods in "+o.BerthNamespace+" (to find the load watcher)")
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning && pods.Items[i].DeletionTimestamp == nil {
			pod = &pods.Items[i]
			break
		}
	}
	if pod == nil {
		return nil, nil, fmt.Errorf("no Running load watcher pod (%s) in namespace %s: is Berth installed there? (--berth-namespace, or --watcher-url http://HOST:PORT)", WatcherLabel, o.BerthNamespace)
	}
	local, stop, err := reach.PortForward(ctx, kube.Config, kube.Client, pod, o.WatcherPort)
	if err != nil {
		return nil, nil, err
	}
	return &Watcher{Base: fmt.Sprintf("http://127.0.0.1:%d", local), Who: fmt.Sprintf("load watcher pod %s/%s", pod.Namespace, pod.Name), Client: hc}, stop, nil
}

// Document reads GET /watcher for window and checks that it is Berth's (berthNodes present).
func (w *Watcher) Document(ctx context.Context, window string) (*loadapi.Response, error) {
	q := url.Values{}
	if window != "" {
		q.Set("window", window)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.Base+loadapi.ReportPath+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if w.Token != "" {
		h := "Authorization"
		if w.Proxied {
			h = loadapi.ReadTokenHeader
		}
		req.Header.Set(h, "Bearer "+w.Token)
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s from %s: %w", loadapi.ReportPath, w.Who, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s from %s: %w", loadapi.ReportPath, w.Who, err)
	}
	// The API server's own refusals are Status objects (JSON); the watcher's are one line of
	// text naming its reason.
	if w.Proxied && strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return nil, fmt.Errorf("the API server does not accept your credentials (to proxy to the %s): log in again or check --kubeconfig/--context", w.Who)
		case http.StatusForbidden:
			return nil, fmt.Errorf("you may not proxy to the %s (get on services/proxy there): bind the chart's <release>-berthctl-reader Role in that namespace (kubectl -n NAMESPACE create rolebinding <you>-berthctl --role=<release>-berthctl-reader --user=<you>)", w.Who)
		case http.StatusServiceUnavailable:
			return nil, fmt.Errorf("the %s has no ready endpoint (the API server answered 503: %s): kubectl get pods -l %s", w.Who, firstLine(string(body)), WatcherLabel)
		}
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		who := "without a token (no --watcher-reader and no " + ReaderAnnotation + " on its Service)"
		if w.Reader != "" {
			who = "as serviceaccount " + w.Reader
		}
		return nil, fmt.Errorf("%s refused to serve node load %s: %s", w.Who, who, firstLine(string(body)))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s %d: %s", w.Who, loadapi.ReportPath, resp.StatusCode, firstLine(string(body)))
	}
	// why: decode into a map first: an upstream watcher's document decodes into Response
	// without error and simply lacks berthNodes, which must not read as "every node missing".
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, &NotBerthWatcherError{Who: w.Who, Why: "its " + loadapi.ReportPath + " answer is not a JSON object"}
	}
	var doc loadapi.Response
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, &NotBerthWatcherError{Who: w.Who, Why: "its " + loadapi.ReportPath + " answer does not decode: " + err.Error()}
	}
	if _, ok := raw["berthNodes"]; !ok {
		// why: Berth's watcher lists every cluster node in berthNodes (a node that never
		// reported as stale), so only a cluster without nodes gives a document without it;
		// measured nodes without it, or no upstream fields at all, mean someone else's server.
		_, ts := raw["timestamp"]
		switch {
		case len(doc.Data.NodeMetricsMap) > 0:
			return nil, &NotBerthWatcherError{Who: w.Who, Why: "it serves the upstream load-watcher document without berthNodes"}
		case !ts:
			return nil, &NotBerthWatcherError{Who: w.Who, Why: "its " + loadapi.ReportPath + " answer has neither berthNodes nor the load-watcher fields"}
		}
	}
	return &doc, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
