package memstore

import (
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// expireBatch bounds the expired records one Claim drops from the head of its shard's expiry queue, so
// that expiry costs every claim a little and none of them a lot.
const expireBatch = 4

// fullSweepEvery is how often (in the callers' time) a full store, or a scope at its quota, may scan
// every record for expired ones before refusing a claim; the scan is the fallback for records the
// expiry queues have not reached yet.
const fullSweepEvery = time.Second

// compactAt is the expiry-queue length below which a shard never compacts its queue.
const compactAt = 64

// live returns the record of key unless it has expired at now; an expired one is dropped.
func (sh *memShard) live(key driver.Key, h uint64, now int64) *memRecord {
	rec := sh.find(key, h)
	if rec != nil && rec.expiresAt <= now {
		sh.drop(rec)
		return nil
	}
	return rec
}

func (sh *memShard) drop(rec *memRecord) {
	if !rec.stored {
		return
	}
	sh.store.forget(rec)
	first := sh.records[rec.hash]
	if first == rec {
		if rec.next == nil {
			delete(sh.records, rec.hash)
		} else {
			sh.records[rec.hash] = rec.next
		}
	} else {
		for p := first; p != nil; p = p.next {
			if p.next == rec {
				p.next = rec.next
				break
			}
		}
	}
	rec.next, rec.stored = nil, false
	sh.count--
	sh.bytes -= rec.size
}

// expire drops up to expireBatch expired records from the head of the queue. A record whose retention
// was extended (by Complete or a take-over) goes to the back of the queue instead; one already
// dropped (released, or met expired by Claim or Lookup) is skipped.
func (sh *memShard) expire(now int64) {
	for n := 0; n < expireBatch && sh.head < len(sh.queue); n++ {
		rec := sh.queue[sh.head]
		if rec.stored {
			if rec.expiresAt > now {
				if !rec.requeue {
					return // the head is live: so, roughly, is everything behind it
				}
				rec.requeue = false
				sh.queue = append(sh.queue, rec)
			} else {
				sh.drop(rec)
			}
		}
		sh.queue[sh.head] = nil
		sh.head++
	}
	// Reclaim the consumed front once it is at least half the slice.
	if sh.head > 32 && sh.head*2 >= len(sh.queue) {
		n := copy(sh.queue, sh.queue[sh.head:])
		clear(sh.queue[n:])
		sh.queue = sh.queue[:n]
		sh.head = 0
	}
}

// sweep scans every record of the shard for expired ones and rebuilds the queue from the survivors.
func (sh *memShard) sweep(now int64) {
	q := sh.queue[:0]
	for _, rec := range sh.queue[sh.head:] {
		if rec.stored && rec.expiresAt <= now {
			sh.drop(rec)
		}
		if rec.stored {
			q = append(q, rec)
		}
	}
	clear(sh.queue[len(q):])
	sh.queue, sh.head = q, 0
}

// sweepAll sweeps every shard, at most once per fullSweepEvery of the callers' time, and reports
// whether it ran. The caller holds no shard lock.
func (s *Store) sweepAll(now int64) bool {
	next := s.nextSweep.Load()
	if now < next || !s.nextSweep.CompareAndSwap(next, now+int64(fullSweepEvery)) {
		return false
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now)
		sh.mu.Unlock()
	}
	return true
}
