package loadaware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(fetchTotal, snapshotAge, outOfRange) })
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
	// OnSnapshot runs after each successful fetch (the tracker prunes there).
	onSnapshot func(*Snapshot)

	successes, failures atomic.Int64
}

// NewWatcher builds a Watcher for baseURL (no trailing slash).
func NewWatcher(plugin, baseURL string, interval, timeout time.Duration, now func() time.Time) *Watcher {
	registerMetrics()
	if now == nil {
		now = time.Now
	}
	return &Watcher{
		plugin:   plugin,
		url:      baseURL + "/watcher?" + loadapi.PodsQuery + "=true",
		client:   &http.Client{Timeout: timeout},
		interval: interval,
		now:      now,
	}
}

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
		if err := w.Refresh(ctx); err != nil && ctx.Err() == nil {
			// Keep going: scoring falls back to the last snapshot, then to neutral once it expires.
			logger.Error(err, "Refreshing load watcher snapshot failed; keeping the previous one")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
		return err
	}
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
	w.snap.Store(s)
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
	req.Header.Set("Accept", "application/json")
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
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, "", &FetchError{"http_status", fmt.Errorf("GET %s: status %d", w.url, resp.StatusCode)}
	}
	var doc loadapi.Response
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&doc); err != nil {
		// A timeout while reading the body lands here too; it is still a broken answer.
		return nil, "", &FetchError{"decode", fmt.Errorf("GET %s: %w", w.url, err)}
	}
	if doc.Timestamp == 0 && doc.Window.End == 0 && len(doc.Data.NodeMetricsMap) == 0 && len(doc.Nodes) == 0 {
		// Nothing a real watcher sends with 200 (it answers 500 before its first window);
		// the KEP's example shape also decodes to this. Keep the data we have.
		return nil, "", &FetchError{"decode", fmt.Errorf("GET %s: empty document (no timestamp, no nodes)", w.url)}
	}
	fetched := w.now()
	var serverNow time.Time
	if d := resp.Header.Get("Date"); d != "" {
		if t, err := http.ParseTime(d); err == nil {
			serverNow = t
		}
	}
	return NewSnapshot(&doc, fetched, serverNow), resp.Header.Get("ETag"), nil
}
