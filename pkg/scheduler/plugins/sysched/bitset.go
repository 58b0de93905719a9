package sysched

import "math/bits"

// bitset holds one bit per interned syscall name. Sets built at different times may have
// different lengths because the interner grows; every operation treats missing words as zero.
type bitset []uint64

func (b *bitset) set(i int) {
	w := i >> 6
	if w >= len(*b) {
		nb := make(bitset, w+1)
		copy(nb, *b)
		*b = nb
	}
	(*b)[w] |= 1 << uint(i&63)
}

func (b *bitset) clear(i int) {
	if w := i >> 6; w < len(*b) {
		(*b)[w] &^= 1 << uint(i&63)
	}
}

func (b bitset) has(i int) bool {
	w := i >> 6
	return w < len(b) && b[w]&(1<<uint(i&63)) != 0
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// or returns a new set a ∪ b.
func (b bitset) or(o bitset) bitset {
	long, short := b, o
	if len(short) > len(long) {
		long, short = short, long
	}
	out := make(bitset, len(long))
	copy(out, long)
	for i, w := range short {
		out[i] |= w
	}
	return out
}

func (b bitset) equal(o bitset) bool {
	long, short := b, o
	if len(short) > len(long) {
		long, short = short, long
	}
	for i := range long {
		var s uint64
		if i < len(short) {
			s = short[i]
		}
		if long[i] != s {
			return false
		}
	}
	return true
}

// countAndNotOr returns |h ∖ p| and |h ∪ p| in one pass; this pair is all Score needs.
func countAndNotOr(h, p bitset) (andNot, or int) {
	n := len(h)
	if len(p) > n {
		n = len(p)
	}
	for i := 0; i < n; i++ {
		var a, b uint64
		if i < len(h) {
			a = h[i]
		}
		if i < len(p) {
			b = p[i]
		}
		andNot += bits.OnesCount64(a &^ b)
		or += bits.OnesCount64(a | b)
	}
	return andNot, or
}

// forEach calls f with the index of every set bit.
func (b bitset) forEach(f func(int)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(wi<<6 + t)
			w &= w - 1
		}
	}
}
