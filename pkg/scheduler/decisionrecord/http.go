package decisionrecord

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// PodGetter reads a pod from the scheduler's informer cache (no API call per request).
type PodGetter func(namespace, name string) (*v1.Pod, error)

// Handler serves GET decisionapi.Path?namespace=NS&name=POD[&uid=UID]. r may be nil. The handler is
// mounted behind the scheduler's authentication and authorisation filters; it does no access
// control of its own. profiles are every profile of this scheduler (recording or not).
func Handler(r *Recorder, pods PodGetter, profiles []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		q := req.URL.Query()
		ns, name, uid := q.Get("namespace"), q.Get("name"), q.Get("uid")
		if ns == "" {
			ns = "default"
		}
		code, body := answer(r, pods, profiles, ns, name, uid)
		writeJSON(w, code, body)
	})
}

// answer is the reply to one query: the pod's record, or a decisionapi.NotFound saying why
// there is none.
func answer(r *Recorder, pods PodGetter, profiles []string, ns, name, uid string) (int, any) {
	var started time.Time
	if r != nil {
		started = r.Started()
	}
	since := started.UTC().Format(time.RFC3339)
	notFound := func(code int, reason, format string, args ...any) (int, any) {
		return code, decisionapi.NotFound{Error: fmt.Sprintf(format, args...), Reason: reason, SchedulerStarted: started}
	}
	if name == "" {
		return notFound(http.StatusBadRequest, decisionapi.ReasonBadRequest, "query parameter name (the pod) is required; namespace defaults to default")
	}
	if !r.Enabled() {
		return notFound(http.StatusNotFound, decisionapi.ReasonDisabled, "decision recording is off in every profile of this scheduler (enable the %s plugin in a profile)", "DecisionRecord")
	}
	var pod *v1.Pod
	var podErr error
	if pods != nil {
		pod, podErr = pods(ns, name)
	}
	if pod != nil && uid == "" {
		uid = string(pod.UID)
	}
	stores, reason, why := r.storesFor(pod, profiles, ns, name)
	if reason != "" {
		return notFound(http.StatusNotFound, reason, "%s", why)
	}
	rec, ok, evictedAt, evictedFrom := find(stores, ns, name)
	switch {
	case ok && uid != "" && rec.UID != uid:
		return notFound(http.StatusNotFound, decisionapi.ReasonStale, "the record of %s/%s is for an earlier pod with that name (uid %s); this pod (uid %s) has not had a scheduling attempt by this scheduler instance (started %s)", ns, name, rec.UID, uid, since)
	case ok:
		return http.StatusOK, rec
	case evictedFrom != nil:
		return notFound(http.StatusNotFound, decisionapi.ReasonEvicted, "the record of %s/%s was evicted at %s to keep profile %s's last %d records (DecisionRecord records)", ns, name, evictedAt.UTC().Format(time.RFC3339), evictedFrom.name, *evictedFrom.args.Records)
	case pod != nil && pod.Spec.NodeName != "":
		return notFound(http.StatusNotFound, decisionapi.ReasonBeforeStart, "pod %s/%s is bound to %s but this scheduler instance (started %s) never scheduled it: it was placed before a restart or by another replica, and records live in memory only", ns, name, pod.Spec.NodeName, since)
	case pod != nil:
		return notFound(http.StatusNotFound, decisionapi.ReasonNeverSeen, "pod %s/%s has not had a scheduling attempt by this scheduler instance (started %s) yet", ns, name, since)
	case podErr != nil && !apierrors.IsNotFound(podErr):
		return notFound(http.StatusNotFound, decisionapi.ReasonNeverSeen, "no record of %s/%s, and reading the pod failed: %v", ns, name, podErr)
	}
	return notFound(http.StatusNotFound, decisionapi.ReasonNeverSeen, "pod %s/%s does not exist and this scheduler instance (started %s) has no record of it", ns, name, since)
}

// storesFor lists the stores to look in: the pod's (ns/name) profile when the pod is known,
// else all, by name. A reason (with why) says the pod's profile has no store to look in.
func (r *Recorder) storesFor(pod *v1.Pod, profiles []string, ns, name string) (stores []*profileRecorder, reason, why string) {
	if pod == nil {
		r.mu.Lock()
		for _, pr := range r.profiles {
			stores = append(stores, pr)
		}
		r.mu.Unlock()
		sort.Slice(stores, func(i, j int) bool { return stores[i].name < stores[j].name })
		return stores, "", ""
	}
	if !contains(profiles, pod.Spec.SchedulerName) {
		return nil, decisionapi.ReasonOtherScheduler, fmt.Sprintf("pod %s/%s is scheduled by %q, not by this scheduler (profiles %s)", ns, name, pod.Spec.SchedulerName, strings.Join(sorted(profiles), ", "))
	}
	pr := r.profile(pod.Spec.SchedulerName)
	if pr == nil {
		return nil, decisionapi.ReasonDisabled, fmt.Sprintf("profile %s does not record decisions (the DecisionRecord plugin is not enabled in it)", pod.Spec.SchedulerName)
	}
	return []*profileRecorder{pr}, "", ""
}

// find returns the first record of ns/name in stores; without one, the store that evicted it
// last, and when.
func find(stores []*profileRecorder, ns, name string) (rec decisionapi.Record, ok bool, evictedAt time.Time, evictedFrom *profileRecorder) {
	for _, pr := range stores {
		rec, ok, ev := pr.store.get(ns, name)
		if ok {
			return rec, true, time.Time{}, nil
		}
		if !ev.IsZero() && ev.After(evictedAt) {
			evictedAt, evictedFrom = ev, pr
		}
	}
	return decisionapi.Record{}, false, evictedAt, evictedFrom
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
