package loadaware

import (
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// EstimateWindow is how long after placement a pod counts at no less than its estimate under
// args: estimateSeconds, or the pod's berth.dev/estimate-seconds annotation where
// podEstimateSecondsLimit allows one, capped at that limit. An annotation that is not a whole
// number of seconds ≥ 0 is ignored (the pod gets estimateSeconds), and the second result says
// so. args must be defaulted; nil when neither is set, so the tracker reads no annotation.
func EstimateWindow(args CommonArgs) func(*v1.Pod) (time.Duration, bool) {
	def, limit := *args.EstimateSeconds, *args.PodEstimateSecondsLimit
	if def == 0 && limit == 0 {
		return nil
	}
	return func(pod *v1.Pod) (time.Duration, bool) {
		secs, malformed := def, false
		if raw, ok := pod.Annotations[configv1.EstimateSecondsAnnotation]; ok && limit > 0 {
			n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
			if err != nil || n < 0 {
				malformed = true
			} else {
				secs = min(n, limit)
			}
		}
		return time.Duration(secs) * time.Second, malformed
	}
}
