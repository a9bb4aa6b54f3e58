package storetest

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/randid"
)

// The write benchmarks advance their clock by benchStep per operation and keep records for
// benchRetention, so that a bounded store reaches a steady state (about 20,000 records: records
// expire as fast as they are made) instead of filling up, and a real server does not keep benchmark
// records around. The window is wide enough that a parallel goroutine descheduled for thousands of
// operations does not find its in-flight record expired by the others' clock.
const (
	benchStep      = 500 * time.Microsecond
	benchRetention = 10 * time.Second
)

// RunBenchmarks measures the operations the middleware performs per request: a first execution (Claim
// then Complete), a replay (Claim on a completed key), a lookup, and both of the first under parallel
// load on distinct keys. newStore is called once per benchmark.
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) driver.Store) {
	b.Helper()
	resp := driver.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_1"}},
		Body:   make([]byte, 256),
	}
	ctx := context.Background()
	f := fp("bench")

	b.Run("ClaimComplete", func(b *testing.B) {
		s := newStore(b)
		scope, prefix := randid.New("scope_"), randid.New("key_")
		base := time.Now().Truncate(time.Millisecond)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			key := driver.Key{Scope: scope, Key: prefix + strconv.Itoa(i)}
			now := base.Add(time.Duration(i) * benchStep)
			i++
			c, err := s.Claim(ctx, key, f, now, now.Add(lease), now.Add(benchRetention))
			if err != nil || c.Status != driver.Claimed {
				b.Fatalf("Claim: %v %v", c.Status, err)
			}
			if err := s.Complete(ctx, key, c.Token, resp, now.Add(benchRetention)); err != nil {
				b.Fatalf("Complete: %v", err)
			}
		}
	})

	b.Run("Replay", func(b *testing.B) {
		s := newStore(b)
		key := driver.Key{Scope: randid.New("scope_"), Key: randid.New("key_")}
		base := time.Now().Truncate(time.Millisecond)
		c, err := s.Claim(ctx, key, f, base, base.Add(lease), base.Add(retention))
		if err != nil || c.Status != driver.Claimed {
			b.Fatalf("Claim: %v %v", c.Status, err)
		}
		if err := s.Complete(ctx, key, c.Token, resp, base.Add(retention)); err != nil {
			b.Fatalf("Complete: %v", err)
		}
		b.ReportAllocs()
		for b.Loop() {
			c, err := s.Claim(ctx, key, f, base, base.Add(lease), base.Add(retention))
			if err != nil || c.Status != driver.Completed {
				b.Fatalf("replay Claim: %v %v", c.Status, err)
			}
		}
	})

	b.Run("Lookup", func(b *testing.B) {
		s := newStore(b)
		key := driver.Key{Scope: randid.New("scope_"), Key: randid.New("key_")}
		base := time.Now().Truncate(time.Millisecond)
		c, err := s.Claim(ctx, key, f, base, base.Add(lease), base.Add(retention))
		if err != nil || c.Status != driver.Claimed {
			b.Fatalf("Claim: %v %v", c.Status, err)
		}
		if err := s.Complete(ctx, key, c.Token, resp, base.Add(retention)); err != nil {
			b.Fatalf("Complete: %v", err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Lookup(ctx, key, base); err != nil {
				b.Fatalf("Lookup: %v", err)
			}
		}
	})

	b.Run("ClaimCompleteParallel", func(b *testing.B) {
		s := newStore(b)
		scope, prefix := randid.New("scope_"), randid.New("key_")
		base := time.Now().Truncate(time.Millisecond)
		var seq atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := seq.Add(1)
				key := driver.Key{Scope: scope, Key: prefix + strconv.FormatInt(i, 10)}
				now := base.Add(time.Duration(i) * benchStep)
				c, err := s.Claim(ctx, key, f, now, now.Add(lease), now.Add(benchRetention))
				if err != nil || c.Status != driver.Claimed {
					b.Errorf("Claim: %v %v", c.Status, err)
					return
				}
				if err := s.Complete(ctx, key, c.Token, resp, now.Add(benchRetention)); err != nil {
					b.Errorf("Complete: %v", err)
					return
				}
			}
		})
	})

	b.Run("ReplayParallel", func(b *testing.B) {
		s := newStore(b)
		scope := randid.New("scope_")
		base := time.Now().Truncate(time.Millisecond)
		// A handful of hot keys, as when clients retry in a storm.
		keys := make([]driver.Key, 16)
		for i := range keys {
			keys[i] = driver.Key{Scope: scope, Key: randid.New("key_")}
			c, err := s.Claim(ctx, keys[i], f, base, base.Add(lease), base.Add(retention))
			if err != nil || c.Status != driver.Claimed {
				b.Fatalf("Claim: %v %v", c.Status, err)
			}
			if err := s.Complete(ctx, keys[i], c.Token, resp, base.Add(retention)); err != nil {
				b.Fatalf("Complete: %v", err)
			}
		}
		var seq atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1))
			for pb.Next() {
				i++
				c, err := s.Claim(ctx, keys[i%len(keys)], f, base, base.Add(lease), base.Add(retention))
				if err != nil || c.Status != driver.Completed {
					b.Errorf("replay Claim: %v %v", c.Status, err)
					return
				}
			}
		})
	})
}
