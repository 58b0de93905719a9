package load

import (
	"math"
	"slices"
)

// Stats summarises the samples of one resource over one window, in percent.
type Stats struct {
	Avg float64 `json:"avg"`
	// Std is the population standard deviation: the window is the whole population the
	// scheduler reasons about, not a sample of a larger one.
	Std float64 `json:"std"`
	P95 float64 `json:"p95"`
	// N is the number of samples behind the numbers; 0 means "no data", never "idle".
	N int `json:"n"`
}

// Compute returns the statistics of vals. vals is reordered.
func Compute(vals []float64) Stats {
	n := len(vals)
	if n == 0 {
		return Stats{}
	}
	var sum float64
	for _, v := range vals {
		sum += v
	}
	avg := sum / float64(n)
	var sq float64
	for _, v := range vals {
		d := v - avg
		sq += d * d
	}
	slices.Sort(vals)
	return Stats{Avg: avg, Std: math.Sqrt(sq / float64(n)), P95: Percentile(vals, 95), N: n}
}

// Percentile is the nearest-rank percentile of sorted values: the smallest value such that at
// least p % of the values are ≤ it. Nearest rank always returns an observed value, so a p95 of a
// node that was never above 50 % is never reported above 50 %.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}
