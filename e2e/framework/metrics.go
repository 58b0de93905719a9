package framework

import (
	"strconv"
	"strings"
)

// MetricValue sums the samples of metric name (every label set) on a Prometheus text page;
// ok says whether the page has any.
func MetricValue(page, name string) (sum float64, ok bool) {
	for _, l := range strings.Split(page, "\n") {
		rest, found := strings.CutPrefix(l, name)
		if !found || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}
