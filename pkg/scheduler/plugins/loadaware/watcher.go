package loadaware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// maxBody caps a watcher answer: a broken or hostile watcher must not make the scheduler
// buffer unbounded memory. 64 MiB is ~100k nodes of metrics plus pod lists.
const maxBody = 64 << 20

var (
	fetchTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_loadaware",
		Name:           "watcher_fetch_total",
		Help:           "Load watcher snapshot fetches by plugin and result (success, not_modified, http_status, decode, transport).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin", "result"})
	snapshotAge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "berth_loadaware",
		Name:           "snapshot_fetched_timestamp_seconds",
		Help:           "Unix time of the last successful load watcher fetch, by plugin.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	outOfRange = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_loadaware",
		Name:           "values_out_of_range_total",
		Help:           "Utilisation values served by the load watcher outside [0,100] % (clamped) or not finite (ignored), by plugin.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	refreshErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_loadaware",
		Name:           "watcher_refresh_errors_total",
		Help:           "Failed load watcher refreshes (any reason), by plugin; the log only says when an outage starts and ends.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	snapshotAgeSeconds = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "berth_loadaware",
		Name:           "snapshot_age_seconds",
		Help:           "Seconds since the last successful load watcher fetch (since start before the first), by plugin; updated every refresh.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	documentForms = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_loadaware",
		Name:           "watcher_documents_total",
		Help:           "Load watcher documents read (200 answers), by plugin and form: typed (Berth's load form) or upstream (the watcher does not serve the typed form: upstream load-watcher, or an older Berth watcher).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin", "form"})
	annotationsIgnored = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "berth_loadaware",
		Name:           "estimate_annotations_ignored_total",
		Help:           "Placed pods whose berth.dev/estimate-seconds annotation was not a whole number of seconds >= 0 (the pod got estimateSeconds), by plugin.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(fetchTotal, snapshotAge, outOfRange, refreshErrors, snapshotAgeSeconds, annotationsIgnored, documentForms)
	})
}

// FetchError classifies a failed fetch for the metric and the log.
type FetchError struct {
	Kind string // http_status, decode, transport
	Err  error
}

func (e *FetchError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// Watcher keeps the latest load watcher snapshot in memory, refreshed in the background.
// Readers never wait on the network: they get whatever was fetched last.
type Watcher struct {
	plugin   string
	url      string
	client   *http.Client
	interval time.Duration
	now      func() time.Time
	snap     atomic.Pointer[Snapshot]
	// etag is the watcher's ETag of snap's document: sent as If-None-Match, so a poll with
	// nothing new is a 304 without a body.
	etag atomic.Pointer[string]
	// install, when set, publishes a new snapshot by calling its second argument (which stores
	// it) itself: the engine's tracker attaches its buckets first (Tracker.Install).
	install func(s *Snapshot, store func())
	// upstreamCPU is the plugin's reading of CPU in an upstream document (nil: GetResourceData's).
	upstreamCPU UpstreamCPU
	// OnSnapshot runs after each successful fetch (the tracker prunes there).
	onSnapshot func(*Snapshot)

	successes, failures atomic.Int64
	// lastOK is the Unix nanoseconds of the last successful fetch (200 or 304); 0 = none yet.
	lastOK atomic.Int64
	// started stands in for lastOK in the age gauge before the first success.
	started        time.Time
	outage         outage
	outageLogEvery time.Duration
}

// NewWatcher builds a Watcher for baseURL (no trailing slash).
func NewWatcher(plugin, baseURL string, interval, timeout time.Duration, now func() time.Time) *Watcher {
	registerMetrics()
	if now == nil {
		now = time.Now
	}
	return &Watcher{
		plugin: plugin,
		url:    baseURL + "/watcher?" + loadapi.PodsQuery + "=true",
		// The watcher serves only readers it can verify: the projected token of the
		// scheduler's pod (loadapi.TokenFile), or $BERTH_WATCHER_TOKEN_FILE outside a pod.
		client:   &http.Client{Timeout: timeout, Transport: loadapi.NewTokenTransport(nil, loadapi.DefaultTokenFile())},
		interval: interval,
		now:      now,
		started:  now(),

		outageLogEvery: DefaultOutageLogEvery,
	}
}

// SetOutageLogEvery changes how often a continuing outage is logged (tests).
func (w *Watcher) SetOutageLogEvery(d time.Duration) { w.outageLogEvery = d }

// Snapshot returns the latest snapshot, nil before the first successful fetch.
func (w *Watcher) Snapshot() *Snapshot { return w.snap.Load() }

// Counts returns (successful, failed) fetches so far.
func (w *Watcher) Counts() (int64, int64) { return w.successes.Load(), w.failures.Load() }

// Run fetches at once, then every interval, until ctx ends. Failures keep the last snapshot.
func (w *Watcher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("plugin", w.plugin, "watcher", w.url)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.RefreshLogged(ctx, logger)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DefaultOutageLogEvery is how often a continuing outage is logged again.
const DefaultOutageLogEvery = 5 * time.Minute

// RefreshLogged is one loop iteration: Refresh, then the log lines and gauges of the watcher's
// reachability. An outage is logged when it starts, then at most once per outageLogEvery while
// it lasts, and once when it ends: a dead watcher must not flood the scheduler's log (every
// plugin instance refreshes every few seconds), and the metrics tell the rest.
func (w *Watcher) RefreshLogged(ctx context.Context, logger klog.Logger) {
	err := w.Refresh(ctx)
	if ctx.Err() != nil {
		return // shutting down: not an outage
	}
	now := w.now()
	o := &w.outage
	switch {
	case err != nil && o.since.IsZero():
		o.since, o.failures, o.logged = now, 1, now
		// Keep going: scoring falls back to the last snapshot, then to neutral once it expires.
		logger.Error(err, "Load watcher unreachable; scoring from the last snapshot until it expires, then neutral",
			"lastSuccess", w.lastOKString(), "nextLogIn", w.outageLogEvery)
	case err != nil:
		o.failures++
		if now.Sub(o.logged) >= w.outageLogEvery {
			o.logged = now
			logger.Error(err, "Load watcher still unreachable", "for", now.Sub(o.since).Round(time.Second),
				"failedRefreshes", o.failures, "lastSuccess", w.lastOKString())
		}
	case !o.since.IsZero():
		logger.Info("Load watcher reachable again", "after", now.Sub(o.since).Round(time.Second), "failedRefreshes", o.failures)
		*o = outage{}
	}
	last := w.started
	if ok := w.lastOK.Load(); ok != 0 {
		last = time.Unix(0, ok)
	}
	snapshotAgeSeconds.WithLabelValues(w.plugin).Set(now.Sub(last).Seconds())
}

// outage is the state of a run of failed refreshes; only the refresh loop touches it.
type outage struct {
	since, logged time.Time // since is zero while the watcher is reachable
	failures      int
}

func (w *Watcher) lastOKString() string {
	if ok := w.lastOK.Load(); ok != 0 {
		return time.Unix(0, ok).UTC().Format(time.RFC3339)
	}
	return "never"
}

// Refresh does one fetch and, on success, publishes the new snapshot.
func (w *Watcher) Refresh(ctx context.Context) error {
	s, etag, err := w.fetch(ctx)
	if err != nil {
		kind := "transport"
		var fe *FetchError
		if errors.As(err, &fe) {
			kind = fe.Kind
		}
		w.failures.Add(1)
		fetchTotal.WithLabelValues(w.plugin, kind).Inc()
		refreshErrors.WithLabelValues(w.plugin).Inc()
		return err
	}
	w.lastOK.Store(w.now().UnixNano())
	if s == nil {
		// 304: the snapshot we hold is still the watcher's current document.
		w.successes.Add(1)
		fetchTotal.WithLabelValues(w.plugin, "not_modified").Inc()
		snapshotAge.WithLabelValues(w.plugin).Set(float64(w.now().Unix()))
		return nil
	}
	if s.OutOfRange > 0 {
		outOfRange.WithLabelValues(w.plugin).Add(float64(s.OutOfRange))
	}
	documentForms.WithLabelValues(w.plugin, s.Form).Inc()
	if w.install != nil {
		w.install(s, func() { w.snap.Store(s) })
	} else {
		w.snap.Store(s)
	}
	w.etag.Store(&etag)
	w.successes.Add(1)
	fetchTotal.WithLabelValues(w.plugin, "success").Inc()
	snapshotAge.WithLabelValues(w.plugin).Set(float64(s.FetchedAt.Unix()))
	if w.onSnapshot != nil {
		w.onSnapshot(s)
	}
	return nil
}

// fetch GETs the document. A nil snapshot with a nil error means 304 Not Modified.
func (w *Watcher) fetch(ctx context.Context) (*Snapshot, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	if err != nil {
		return nil, "", &FetchError{"transport", err}
	}
	// Berth's typed form first; an upstream watcher (or an older Berth one) ignores it and
	// answers with the upstream document, which is read instead.
	req.Header.Set("Accept", acceptHeader)
	// Go's transport asks for gzip and decompresses by itself, so Accept-Encoding is left to it.
	held := w.snap.Load() != nil
	if e := w.etag.Load(); held && e != nil && *e != "" {
		req.Header.Set("If-None-Match", *e)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, "", &FetchError{"transport", err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && held {
		return nil, "", nil
	}
	if resp.StatusCode != http.StatusOK {
		// The refusal's first line (a 401/403 names the token or permission missing); the rest
		// is drained so the connection can be reused.
		return nil, "", &FetchError{"http_status", fmt.Errorf("GET %s: status %d%s", w.url, resp.StatusCode, loadapi.RefusalDetail(resp))}
	}
	s, err := w.decode(resp)
	if err != nil {
		return nil, "", err
	}
	return s, resp.Header.Get("ETag"), nil
}

// acceptHeader asks for Berth's typed form, and takes the upstream document otherwise.
var acceptHeader = loadapi.LoadMediaType + ", application/json;q=0.9"

// decode reads a 200 answer in the form its Content-Type names: Berth's typed Load, or
// anything else as the upstream document.
func (w *Watcher) decode(resp *http.Response) (*Snapshot, error) {
	body := json.NewDecoder(io.LimitReader(resp.Body, maxBody))
	fetched := w.now()
	var serverNow time.Time
	if d := resp.Header.Get("Date"); d != "" {
		if t, err := http.ParseTime(d); err == nil {
			serverNow = t
		}
	}
	// Nothing a real watcher sends with 200 is empty (it answers 500 before its first window);
	// the KEP's example shape also decodes to that. Keep the data we have.
	empty := &FetchError{"decode", fmt.Errorf("GET %s: empty document (no timestamp, no nodes)", w.url)}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == loadapi.LoadMediaType {
		var doc loadapi.Load
		if err := body.Decode(&doc); err != nil {
			return nil, &FetchError{"decode", fmt.Errorf("GET %s (%s): %w", w.url, mt, err)}
		}
		if doc.Timestamp == 0 && len(doc.Nodes) == 0 {
			return nil, empty
		}
		s := NewLoadSnapshot(&doc, fetched, serverNow)
		s.Form = FormTyped
		return s, nil
	}
	var doc loadapi.Response
	if err := body.Decode(&doc); err != nil {
		// A timeout while reading the body lands here too; it is still a broken answer.
		return nil, &FetchError{"decode", fmt.Errorf("GET %s: %w", w.url, err)}
	}
	if doc.Timestamp == 0 && doc.Window.End == 0 && len(doc.Data.NodeMetricsMap) == 0 && len(doc.Nodes) == 0 {
		return nil, empty
	}
	s := newUpstreamSnapshot(&doc, fetched, serverNow, w.upstreamCPU)
	s.Form = FormUpstream
	return s, nil
}
