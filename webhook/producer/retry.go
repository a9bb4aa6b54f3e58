package producer

import (
	"context"
	"errors"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// settleTimeout bounds each store call that records an attempt's outcome. Such calls run even after
// the dispatcher's context is cancelled, so that a stopping dispatcher does not leave a delivery it has
// made looking undelivered, and a failed one is retried (see record).
const settleTimeout = 10 * time.Second

// Bounds of the pause between tries to record an outcome.
const (
	recordBackoffMin = 50 * time.Millisecond
	recordBackoffMax = 5 * time.Second
)

// DefaultSchedule returns the default retry schedule: delays doubling from one minute up to twelve
// hours, 15 retries over 72 hours in all, so an endpoint that is down for up to about three days still
// receives its events (Stripe's window). Jitter spreads each delay by ±20 %.
func DefaultSchedule() []time.Duration {
	return ExponentialSchedule(time.Minute, 12*time.Hour, 72*time.Hour)
}

// ExponentialSchedule returns retry delays that start at first, double up to ceiling, and stop when
// they add up to total (the last delay is shortened to land on it). It returns nil when any argument is
// not positive.
func ExponentialSchedule(first, ceiling, total time.Duration) []time.Duration {
	if first <= 0 || ceiling <= 0 || total <= 0 {
		return nil
	}
	var out []time.Duration
	var sum time.Duration
	for d := min(first, ceiling); sum < total; d = min(2*d, ceiling) {
		d = min(d, total-sum)
		out = append(out, d)
		sum += d
	}
	return out
}

// retryAt returns when attempt number attempt+1 is due after the attempt-th failed at at, or zero
// when the schedule is exhausted.
func (d *Dispatcher) retryAt(attempt int, at time.Time) time.Time {
	if attempt > len(d.schedule) {
		return time.Time{}
	}
	delay := d.schedule[attempt-1]
	if d.jitter > 0 {
		delay = time.Duration(float64(delay) * (1 + d.jitter*(2*d.rand()-1)))
	}
	return at.Add(max(delay, 0))
}

// release hands group's deliveries back unattempted, due again at retryAt, and returns how many.
func (d *Dispatcher) release(ctx context.Context, group []driver.Delivery, retryAt time.Time) int {
	return d.releaseHeld(ctx, group, retryAt, time.Time{})
}

// releaseHeld is release that also holds the stream until hold (driver.Settlement.Hold), when the
// Log is a Settler and hold is not zero.
func (d *Dispatcher) releaseHeld(ctx context.Context, group []driver.Delivery, retryAt, hold time.Time) int {
	if st, ok := d.log.(driver.Settler); ok && (len(group) > 1 || !hold.IsZero()) {
		// The unsent rest of a run, in one call (one statement on PostgreSQL).
		ss := make([]driver.Settlement, len(group))
		for i, dl := range group {
			ss[i] = driver.Settlement{Lease: dl.Lease, Release: true, Attempt: driver.Attempt{RetryAt: retryAt}, Hold: hold}
		}
		errs := st.Settle(ctx, ss)
		for i, dl := range group {
			err := errors.New("producer: Settle returned fewer answers than settlements")
			if i < len(errs) {
				err = errs[i]
			}
			d.settleErr(ctx, dl, "release", err)
		}
		return len(group)
	}
	for _, dl := range group {
		d.settleErr(ctx, dl, "release", d.log.Release(ctx, dl.Lease, retryAt))
	}
	return len(group)
}

// settleWindowTail records the outcomes of requests that went out together with one that failed: the
// deliveries that succeeded are delivered, the failed ones wait for their own retry, the cancelled
// ones are handed back. Each settlement holds the stream until hold (zero: no hold).
func (d *Dispatcher) settleWindowTail(ctx context.Context, group []driver.Delivery, results []result, hold time.Time) Stats {
	var st Stats
	for k, dl := range group {
		r := &results[k]
		switch {
		case r.Class == "":
			d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Delivered: true, Attempt: r.Attempt, Hold: hold})
			st.Delivered++
		case r.cancelled:
			st.Released += d.releaseHeld(context.WithoutCancel(ctx), []driver.Delivery{dl}, r.At, hold)
		default:
			st.add(d.recordFailure(ctx, dl, r, hold))
		}
	}
	return st
}

// recordFailure schedules the failed attempt r's retry (zero when the schedule is exhausted), logs it
// and records it, and counts it as Failed or Abandoned. The settlement holds the stream until hold,
// or until the end of the pause the endpoint asked for (Retry-After), whichever is later; the retry
// waits for the pause too, and never comes sooner than the Schedule says.
func (d *Dispatcher) recordFailure(ctx context.Context, dl driver.Delivery, r *result, hold time.Time) Stats {
	end := r.At.Add(r.Latency)
	r.RetryAt = d.retryAt(dl.Attempts+1, end)
	if r.pause > 0 {
		until := end.Add(r.pause)
		if !r.RetryAt.IsZero() && until.After(r.RetryAt) {
			r.RetryAt = until
		}
		if until.After(hold) {
			hold = until
		}
		r.held = until
	}
	d.logger.WarnContext(ctx, "producer: delivery failed", "endpoint", dl.Stream, "sequence", dl.Sequence,
		"attempt", dl.Attempts+1, "reason", r.Reason, "retry_at", r.RetryAt)
	d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Attempt: r.Attempt, Hold: hold})
	if r.RetryAt.IsZero() {
		return Stats{Abandoned: 1}
	}
	return Stats{Failed: 1}
}

// record records an attempt's outcome, each try with its own deadline, until it succeeds or the lease
// is lost. A delivery the endpoint acknowledged must not be sent again because a store call timed out,
// so failures are retried with backoff for as long as the dispatcher runs; once it is stopping, until
// the delivery's lease ends (after which another dispatcher may claim it anyway, and the consumer's
// duplicate check takes over).
func (d *Dispatcher) record(ctx context.Context, dl driver.Delivery, s driver.Settlement) {
	what := outcomeOf(s.Delivered, s.Attempt).String()
	wait := recordBackoffMin
	for try := 1; ; try++ {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := d.settleOne(c, s)
		cancel()
		if err == nil || errors.Is(err, driver.ErrLeaseLost) {
			d.settleErr(ctx, dl, what, err)
			return
		}
		if ctx.Err() != nil && !d.now().Before(dl.LeaseUntil) {
			d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed; giving up as the lease has ended",
				"endpoint", dl.Stream, "sequence", dl.Sequence, "outcome", what, "tries", try, "error", err)
			return
		}
		d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed; retrying", "endpoint", dl.Stream,
			"sequence", dl.Sequence, "outcome", what, "try", try, "error", err)
		t := time.NewTimer(wait)
		<-t.C
		wait = min(2*wait, recordBackoffMax)
	}
}

// settleOne records one outcome: through the group commit when the Log is a Settler, else by
// Delivered or Failed.
func (d *Dispatcher) settleOne(ctx context.Context, s driver.Settlement) error {
	if st, ok := d.log.(driver.Settler); ok {
		return d.group.do(ctx, st, s)
	}
	if s.Delivered {
		return d.log.Delivered(ctx, s.Lease, s.Attempt)
	}
	return d.log.Failed(ctx, s.Lease, s.Attempt)
}

func (d *Dispatcher) settleErr(ctx context.Context, dl driver.Delivery, what string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, driver.ErrLeaseLost):
		// Another dispatcher re-claimed the delivery after our lease ran out; its outcome wins.
		d.logger.WarnContext(ctx, "producer: delivery lease lost", "endpoint", dl.Stream, "sequence", dl.Sequence, "outcome", what)
	default:
		// The lease will run out and the delivery be retried: at least once, never lost.
		d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed", "endpoint", dl.Stream,
			"sequence", dl.Sequence, "outcome", what, "error", err)
	}
}
