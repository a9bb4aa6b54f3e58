package otelconv

import (
	"sync"
	"sync/atomic"
)

// boundedSets maps up to max distinct keys to values built once per key (attribute options, mostly),
// so that recording a measurement looks a value up instead of building attributes. Reads take no
// lock: the map is replaced, never changed, when a key is added. It is safe for concurrent use.
type boundedSets[K comparable, V any] struct {
	max   int
	build func(K) V
	other V

	mu sync.Mutex // serializes additions
	m  atomic.Pointer[map[K]V]
}

// newBoundedSets returns a boundedSets whose keys past max share the value built for overflow.
func newBoundedSets[K comparable, V any](max int, overflow K, build func(K) V) *boundedSets[K, V] {
	b := &boundedSets[K, V]{max: max, build: build, other: build(overflow)}
	m := make(map[K]V)
	b.m.Store(&m)
	return b
}

// get returns k's value, built on first use, and true; past the bound, the overflow value and false.
func (b *boundedSets[K, V]) get(k K) (V, bool) {
	if v, ok := (*b.m.Load())[k]; ok {
		return v, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := *b.m.Load()
	if v, ok := cur[k]; ok {
		return v, true
	}
	if len(cur) >= b.max {
		return b.other, false
	}
	next := make(map[K]V, len(cur)+1)
	for kk, vv := range cur {
		next[kk] = vv
	}
	v := b.build(k)
	next[k] = v
	b.m.Store(&next)
	return v, true
}
