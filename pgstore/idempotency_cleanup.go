package pgstore

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of CleanupOptions.
const (
	DefaultCleanupInterval = time.Minute
	DefaultCleanupBatch    = 1000
)

// cleanupMaxStatement bounds one DeleteExpired call when the interval is longer: a batch of a
// thousand index-ordered deletes takes milliseconds, so a call still running after this is stuck (a
// lock, a stalled connection) and is better abandoned and retried.
const cleanupMaxStatement = 30 * time.Second

// CleanupOptions configures IdempotencyStore.RunCleanup. A nil *CleanupOptions and the zero value mean
// the defaults; zero or negative fields take their defaults too.
type CleanupOptions struct {
	// Interval is the pause between passes. Default DefaultCleanupInterval.
	Interval time.Duration
	// Batch is the most rows one DELETE removes. Default DefaultCleanupBatch.
	Batch int
	// Now is the clock that decides which rows have expired. Default time.Now.
	Now func() time.Time
	// Logger receives failed passes (Error) and the rows each pass removed (Debug). Default: nothing
	// is logged.
	Logger *slog.Logger
}

// RunCleanup deletes expired records until ctx is done, then returns nil. Start it once per process,
// next to the store, and stop it by cancelling ctx:
//
//	go store.RunCleanup(ctx, nil)
//
// A pass runs at once and then every Interval. It calls DeleteExpired(now, Batch) again for as long as
// a call removes a full batch, so a backlog drains in short statements that each hold few row locks,
// and it ends at rows that expired after the pass began. Each call has a deadline of its own (the
// Interval or 30 s, whichever is shorter). A failing pass is logged and the next one runs at the
// next interval: RunCleanup never stops on an error, so a database outage pauses retention and does
// not end it. Every replica may run it; concurrent passes skip the rows another one is deleting.
//
// RunCleanup uses the store's DB from its own goroutine, so that DB must be safe for concurrent use (a
// pool is).
func (s *IdempotencyStore) RunCleanup(ctx context.Context, opts *CleanupOptions) error {
	if s == nil || s.db == nil {
		return errZeroIdempotencyStore
	}
	var o CleanupOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = DefaultCleanupInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultCleanupBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	timeout := min(o.Interval, cleanupMaxStatement)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		n, err := s.cleanupPass(ctx, o.Now(), o.Batch, timeout)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			o.Logger.ErrorContext(ctx, "pgstore: idempotency cleanup pass failed; retrying at the next interval",
				slog.String("table", s.cfg.qualified), slog.Int64("deleted", n), slog.Any("error", err))
		default:
			o.Logger.DebugContext(ctx, "pgstore: idempotency cleanup pass", slog.String("table", s.cfg.qualified), slog.Int64("deleted", n))
		}
		timer.Reset(o.Interval)
	}
}

// cleanupPass deletes the rows expired at now, batch by batch, and returns how many it deleted.
func (s *IdempotencyStore) cleanupPass(ctx context.Context, now time.Time, batch int, timeout time.Duration) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		n, err := s.DeleteExpired(cctx, now, batch)
		cancel()
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
	}
	return total, ctx.Err()
}
