package explain

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PodGetter reads a pod from the scheduler's informer cache (no API call per request).
type PodGetter func(namespace, name string) (*v1.Pod, error)

// NotFound is the endpoint's 404 body: why there is no record, in words.
type NotFound struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// SchedulerStarted is when this scheduler instance started: it holds no record of
	// anything scheduled before.
	SchedulerStarted time.Time `json:"schedulerStarted"`
}

// Reasons a record is missing.
const (
	ReasonDisabled       = "RecordingDisabled"
	ReasonOtherScheduler = "OtherScheduler"
	ReasonEvicted        = "Evicted"
	ReasonBeforeStart    = "BeforeStart"
	ReasonNeverSeen      = "NeverSeen"
	ReasonStale          = "Stale"
	ReasonBadRequest     = "BadRequest"
)

// Handler serves GET Path?namespace=NS&name=POD. r may be nil (recording off): every request
// then gets a 404 saying so. The handler is mounted behind the scheduler's authentication and
// authorisation filters; it does no access control of its own.
func Handler(r *Recorder, pods PodGetter, profiles []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		ns, name := req.URL.Query().Get("namespace"), req.URL.Query().Get("name")
		if ns == "" {
			ns = "default"
		}
		var started time.Time
		if r != nil {
			started = r.Started()
		}
		notFound := func(code int, reason, format string, args ...any) {
			writeJSON(w, code, NotFound{Error: fmt.Sprintf(format, args...), Reason: reason, SchedulerStarted: started})
		}
		if name == "" {
			notFound(http.StatusBadRequest, ReasonBadRequest, "query parameter name (the pod) is required; namespace defaults to default")
			return
		}
		if r == nil {
			notFound(http.StatusNotFound, ReasonDisabled, "decision recording is off in this scheduler (--explain-records=0)")
			return
		}
		rec, ok, evictedAt := r.Get(ns, name)
		var pod *v1.Pod
		var podErr error
		if pods != nil {
			pod, podErr = pods(ns, name)
		}
		if ok {
			if pod != nil && string(pod.UID) != rec.UID {
				notFound(http.StatusNotFound, ReasonStale, "the record of %s/%s is for an earlier pod with that name (uid %s); the current pod (uid %s) has not been scheduled by this scheduler yet", ns, name, rec.UID, pod.UID)
				return
			}
			writeJSON(w, http.StatusOK, rec)
			return
		}
		if pod != nil && !contains(profiles, pod.Spec.SchedulerName) {
			notFound(http.StatusNotFound, ReasonOtherScheduler, "pod %s/%s is scheduled by %q, not by this scheduler (profiles %s)", ns, name, pod.Spec.SchedulerName, strings.Join(sorted(profiles), ", "))
			return
		}
		if !evictedAt.IsZero() {
			notFound(http.StatusNotFound, ReasonEvicted, "the record of %s/%s was evicted at %s to keep the last %d records (--explain-records)", ns, name, evictedAt.UTC().Format(time.RFC3339), r.opts.Records)
			return
		}
		if pod != nil && pod.Spec.NodeName != "" {
			notFound(http.StatusNotFound, ReasonBeforeStart, "pod %s/%s is bound to %s but this scheduler instance (started %s) never scheduled it: it was placed before a restart or by another replica, and records live in memory only", ns, name, pod.Spec.NodeName, started.UTC().Format(time.RFC3339))
			return
		}
		if pod != nil {
			notFound(http.StatusNotFound, ReasonNeverSeen, "pod %s/%s has not had a scheduling attempt by this scheduler instance (started %s) yet", ns, name, started.UTC().Format(time.RFC3339))
			return
		}
		if podErr != nil && !apierrors.IsNotFound(podErr) {
			notFound(http.StatusNotFound, ReasonNeverSeen, "no record of %s/%s, and reading the pod failed: %v", ns, name, podErr)
			return
		}
		notFound(http.StatusNotFound, ReasonNeverSeen, "pod %s/%s does not exist and this scheduler instance (started %s) has no record of it", ns, name, started.UTC().Format(time.RFC3339))
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
