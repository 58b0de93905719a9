package load

import "time"

// Sample is one utilisation reading, in percent.
type Sample struct {
	Time   time.Time
	CPU    float64
	Memory float64
}

// Ring keeps the newest Cap samples; memory use is fixed whatever the uptime.
type Ring struct {
	buf  []Sample
	next int // index the next Push writes
	n    int // number of valid samples, ≤ len(buf)
}

// NewRing returns a ring holding at most capacity samples (at least 1).
func NewRing(capacity int) *Ring {
	if capacity < 1 {
		capacity = 1
	}
	return &Ring{buf: make([]Sample, capacity)}
}

// Cap is the fixed capacity.
func (r *Ring) Cap() int { return len(r.buf) }

// Len is the number of samples held.
func (r *Ring) Len() int { return r.n }

// Push adds s, overwriting the oldest sample when full.
func (r *Ring) Push(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

// Since calls fn for every sample with Time after t, oldest first.
func (r *Ring) Since(t time.Time, fn func(Sample)) {
	start := (r.next - r.n + len(r.buf)) % len(r.buf)
	for i := 0; i < r.n; i++ {
		s := r.buf[(start+i)%len(r.buf)]
		if s.Time.After(t) {
			fn(s)
		}
	}
}

// Last returns the newest sample.
func (r *Ring) Last() (Sample, bool) {
	if r.n == 0 {
		return Sample{}, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}
