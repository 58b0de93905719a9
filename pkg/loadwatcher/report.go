package loadwatcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// Rejection reasons, used as the "reason" label of the rejected-reports counter.
const (
	ReasonMethod          = "method"
	ReasonNoToken         = "no_token"
	ReasonInvalidToken    = "invalid_token"
	ReasonAuthUnavailable = "auth_unavailable"
	ReasonWrongSA         = "wrong_service_account"
	ReasonWrongNode       = "wrong_node"
	ReasonTooLarge        = "too_large"
	ReasonBadJSON         = "bad_json"
	ReasonBadNode         = "bad_node_name"
	ReasonUnknownNode     = "unknown_node"
	ReasonBadTime         = "bad_time"
	ReasonBadWindow       = "bad_window"
	ReasonBadValue        = "bad_value"
	ReasonTooManyPods     = "too_many_pods"
	ReasonBadPodUID       = "bad_pod_uid"
	ReasonOutOfOrder      = "out_of_order"
	ReasonBadInstance     = "bad_instance"
	ReasonBadPodUsage     = "bad_pod_usage"
)

// ValidationError is a refused report: Reason is a stable label value, Msg is for the log.
type ValidationError struct {
	Reason string
	Msg    string
}

func (e *ValidationError) Error() string { return e.Reason + ": " + e.Msg }

func invalid(reason, format string, args ...any) error {
	return &ValidationError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Limits are the bounds Validate enforces.
type Limits struct {
	MaxPodUIDs int
	// MaxFuture is how far ahead of the watcher's clock a report time may be (clock skew).
	MaxFuture time.Duration
	// MaxAge is how old a report may be on arrival; older ones would only be stored as stale.
	MaxAge time.Duration
}

// DefaultLimits are the limits used when a field is zero.
var DefaultLimits = Limits{MaxPodUIDs: DefaultMaxPodUIDs, MaxFuture: time.Minute, MaxAge: 5 * time.Minute}

// DecodeReport reads one report from a body: strict JSON (unknown fields are errors, as a
// misspelt field would otherwise be silently zero) and nothing after it. Errors of r itself
// (e.g. *http.MaxBytesError) are returned wrapped.
func DecodeReport(r io.Reader) (*Report, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isSyntaxError(err) {
			return nil, err // a read error of r, e.g. the body limit
		}
		return nil, errors.New("trailing data after the report")
	}
	return &rep, nil
}

func isSyntaxError(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// ValidateReport checks everything that can be checked without the cluster: identity and node
// existence are the server's job.
func ValidateReport(r *Report, now time.Time, l Limits) error {
	l = l.withDefaults()
	if errs := validation.IsDNS1123Subdomain(r.Node); len(errs) > 0 {
		// The name is echoed to the caller and logged: never unbounded.
		return invalid(ReasonBadNode, "node name %q: %v", truncate(r.Node, 80), errs)
	}
	if err := validateTime(r.Time, now, l); err != nil {
		return err
	}
	if len(r.Instance) > loadapi.MaxInstanceLen || !printable(r.Instance) {
		return invalid(ReasonBadInstance, "instance %q: want at most %d printable characters", truncate(r.Instance, 80), loadapi.MaxInstanceLen)
	}
	if r.Instance != "" && r.Seq == 0 {
		return invalid(ReasonBadInstance, "instance %q without seq (seq starts at 1)", r.Instance)
	}
	if err := checkPercent("latest.cpu", r.Latest.CPU); err != nil {
		return err
	}
	if err := checkPercent("latest.memory", r.Latest.Memory); err != nil {
		return err
	}
	if err := validateWindows(r.Windows); err != nil {
		return err
	}
	if err := validatePodUIDs(r.PodUIDs, l.MaxPodUIDs); err != nil {
		return err
	}
	return validatePods(r)
}

// withDefaults fills the limits left zero from DefaultLimits.
func (l Limits) withDefaults() Limits {
	if l.MaxPodUIDs == 0 {
		l.MaxPodUIDs = DefaultLimits.MaxPodUIDs
	}
	if l.MaxFuture == 0 {
		l.MaxFuture = DefaultLimits.MaxFuture
	}
	if l.MaxAge == 0 {
		l.MaxAge = DefaultLimits.MaxAge
	}
	return l
}

// validateTime refuses a report time (Unix seconds) that is not positive, too far ahead of
// now, or too old.
func validateTime(t int64, now time.Time, l Limits) error {
	if t <= 0 {
		return invalid(ReasonBadTime, "time %d", t)
	}
	// Whole seconds on both sides: no time.Duration (±292 years) can overflow, whatever t is.
	nowSec := now.Unix()
	if ahead := t - nowSec; ahead > int64(l.MaxFuture/time.Second) {
		return invalid(ReasonBadTime, "time %s is %s ahead of the watcher (limit %s)", unixString(t), secondsString(ahead), l.MaxFuture)
	}
	if age := nowSec - t; age > int64(l.MaxAge/time.Second) {
		return invalid(ReasonBadTime, "time %s is %s old, older than %s", unixString(t), secondsString(age), l.MaxAge)
	}
	return nil
}

// validateWindows wants each known window at most once, with samples and percentages.
func validateWindows(windows []loadapi.WindowReport) error {
	if len(windows) == 0 {
		return invalid(ReasonBadWindow, "no windows")
	}
	seen := make(map[string]bool, len(WindowNames))
	for _, w := range windows {
		if !slices.Contains(WindowNames, w.Window) {
			return invalid(ReasonBadWindow, "unknown window %q", w.Window)
		}
		if seen[w.Window] {
			return invalid(ReasonBadWindow, "window %q twice", w.Window)
		}
		seen[w.Window] = true
		if w.Samples <= 0 {
			return invalid(ReasonBadWindow, "window %q has %d samples", w.Window, w.Samples)
		}
		for _, v := range []struct {
			name string
			val  float64
		}{
			{"cpu.avg", w.CPU.Avg}, {"cpu.std", w.CPU.Std}, {"cpu.p95", w.CPU.P95},
			{"memory.avg", w.Memory.Avg}, {"memory.std", w.Memory.Std}, {"memory.p95", w.Memory.P95},
		} {
			if err := checkPercent(w.Window+"."+v.name, v.val); err != nil {
				return err
			}
		}
	}
	return nil
}

func validatePodUIDs(uids []string, limit int) error {
	if len(uids) > limit {
		return invalid(ReasonTooManyPods, "%d pod UIDs, limit %d", len(uids), limit)
	}
	for _, uid := range uids {
		// Kubernetes UIDs are RFC 4122 strings (36 bytes); allow any short printable token so
		// a cluster with another UID scheme still works, but never unbounded strings.
		if uid == "" || len(uid) > 64 {
			return invalid(ReasonBadPodUID, "pod UID %q", truncate(uid, 80))
		}
		if !printable(uid) {
			return invalid(ReasonBadPodUID, "pod UID %q has a non-printable character", truncate(uid, 80))
		}
	}
	return nil
}

// validatePods checks the per-pod usage: bounded, every pod one the report lists (an agent
// measures the pods it lists; anything else is a bug or a forgery, and the scheduler must not
// subtract it from an estimate), each pod once, values in range, windows the node has.
func validatePods(r *Report) error {
	if len(r.Pods) == 0 {
		return nil
	}
	if len(r.Pods) > loadapi.MaxPods {
		return invalid(ReasonTooManyPods, "%d pods with usage, limit %d", len(r.Pods), loadapi.MaxPods)
	}
	listed := make(map[string]bool, len(r.PodUIDs))
	for _, uid := range r.PodUIDs {
		listed[uid] = false
	}
	nodeWindows := make(map[string]bool, len(r.Windows))
	for _, w := range r.Windows {
		nodeWindows[w.Window] = true
	}
	for i, p := range r.Pods {
		seen, ok := listed[p.UID]
		if !ok {
			return invalid(ReasonBadPodUsage, "pods[%d]: %q is not in podUIDs", i, truncate(p.UID, 80))
		}
		if seen {
			return invalid(ReasonBadPodUsage, "pods[%d]: %q twice", i, truncate(p.UID, 80))
		}
		listed[p.UID] = true
		if err := checkPercent(fmt.Sprintf("pods[%d].latest.cpu", i), p.Latest.CPU); err != nil {
			return err
		}
		if err := checkPercent(fmt.Sprintf("pods[%d].latest.memory", i), p.Latest.Memory); err != nil {
			return err
		}
		if p.CPUMillicores < 0 || p.MemoryBytes < 0 {
			return invalid(ReasonBadPodUsage, "pods[%d]: negative cpuMillicores or memoryBytes", i)
		}
		if len(p.Windows) > len(WindowNames) {
			return invalid(ReasonBadPodUsage, "pods[%d]: %d windows", i, len(p.Windows))
		}
		wseen := map[string]bool{}
		for _, w := range p.Windows {
			if !nodeWindows[w.Window] || wseen[w.Window] {
				return invalid(ReasonBadPodUsage, "pods[%d]: window %q unknown, repeated or not among the node's", i, truncate(w.Window, 20))
			}
			wseen[w.Window] = true
			if err := checkPercent(fmt.Sprintf("pods[%d].%s.cpu", i, w.Window), w.CPU); err != nil {
				return err
			}
			if err := checkPercent(fmt.Sprintf("pods[%d].%s.memory", i, w.Window), w.Memory); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPercent(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 100 {
		return invalid(ReasonBadValue, "%s = %v, want a percentage in [0,100]", name, v)
	}
	return nil
}

// printable is visible ASCII without spaces.
func printable(s string) bool {
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// unixString shows a Unix time as RFC 3339 when it is a plausible date, else as the number.
func unixString(sec int64) string {
	const year10000 = 253402300800
	if sec < 0 || sec >= year10000 {
		return fmt.Sprintf("%d (Unix seconds)", sec)
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// secondsString shows a non-negative number of seconds as a duration when one can hold it.
func secondsString(sec int64) string {
	const maxDurationSec = int64(math.MaxInt64 / int64(time.Second))
	if sec < 0 || sec > maxDurationSec {
		return fmt.Sprintf("%ds", sec)
	}
	return (time.Duration(sec) * time.Second).String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
