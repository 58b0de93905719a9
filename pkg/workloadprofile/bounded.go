package workloadprofile

import (
	"container/list"
	"slices"
	"time"
)

// sample is what a bounded store keeps per measured pod: its UID and when it was last measured.
type sample interface {
	podUID() string
	measuredAt() time.Time
}

// bounded keeps the latest sample of each measured pod per key (a workload, a namespace),
// within two bounds: maxPer pods per key and maxKeys keys, the least recently measured out
// first in both. Not safe for concurrent use: one goroutine feeds it and reads it.
type bounded[K comparable, S sample] struct {
	maxKeys, maxPer int
	groups          map[K]*group[K, S]
	// lru orders keys by last measurement, least recent at the front.
	lru list.List
}

type group[K comparable, S sample] struct {
	key  K
	pods []S
	elem *list.Element
}

func newBounded[K comparable, S sample](maxKeys, maxPer int) *bounded[K, S] {
	return &bounded[K, S]{maxKeys: maxKeys, maxPer: maxPer, groups: map[K]*group[K, S]{}}
}

// put stores pod uid's sample under key: next(nil) for a pod not held yet, next(old) for one
// held (the pod's previous sample), so a pod counts once, at its latest.
func (b *bounded[K, S]) put(key K, uid string, next func(old *S) S) {
	g := b.groups[key]
	if g == nil {
		if len(b.groups) >= b.maxKeys {
			if front := b.lru.Front(); front != nil {
				delete(b.groups, b.lru.Remove(front).(*group[K, S]).key)
			}
		}
		g = &group[K, S]{key: key}
		g.elem = b.lru.PushBack(g)
		b.groups[key] = g
	} else {
		b.lru.MoveToBack(g.elem)
	}
	for i := range g.pods {
		if g.pods[i].podUID() == uid {
			g.pods[i] = next(&g.pods[i])
			return
		}
	}
	if len(g.pods) >= b.maxPer {
		oldest := 0
		for i := range g.pods {
			if g.pods[i].measuredAt().Before(g.pods[oldest].measuredAt()) {
				oldest = i
			}
		}
		g.pods = slices.Delete(g.pods, oldest, oldest+1)
	}
	g.pods = append(g.pods, next(nil))
}

// sweep drops samples measured more than maxAge before now, forgets keys left without any, and
// calls each with every other key's samples.
func (b *bounded[K, S]) sweep(now time.Time, maxAge time.Duration, each func(K, []S)) {
	for k, g := range b.groups {
		g.pods = slices.DeleteFunc(g.pods, func(s S) bool { return now.Sub(s.measuredAt()) > maxAge })
		if len(g.pods) == 0 {
			b.lru.Remove(g.elem)
			delete(b.groups, k)
			continue
		}
		each(k, g.pods)
	}
}

// size is the number of keys and of samples held.
func (b *bounded[K, S]) size() (keys, samples int) {
	for _, g := range b.groups {
		samples += len(g.pods)
	}
	return len(b.groups), samples
}
