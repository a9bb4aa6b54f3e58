package producer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// groupByStream splits a claimed batch per stream, each group in sequence order, the groups in the
// order their first delivery was claimed.
func groupByStream(batch []driver.Delivery) [][]driver.Delivery {
	idx := make(map[string]int)
	var groups [][]driver.Delivery
	for _, dl := range batch {
		i, ok := idx[dl.Stream]
		if !ok {
			i = len(groups)
			idx[dl.Stream] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], dl)
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b driver.Delivery) int { return cmp.Compare(a.Sequence, b.Sequence) })
	}
	return groups
}

// work is one endpoint's worker: it holds one request slot (reserved by claim) and the endpoint's
// busy mark, looks the endpoint up, takes up to PerEndpoint slots within the licensee's PerOwner, and
// delivers the group. It gives everything back when done and wakes Run if Run was short of capacity.
func (d *Dispatcher) work(ctx context.Context, group []driver.Delivery) (st Stats) {
	stream := group[0].Stream
	slots := 1 // reserved by claim
	owner, haveOwner := "", false
	defer func() {
		// A full run — as long as a claim gives one endpoint — delivered in full means the endpoint
		// probably has more waiting: claim again now rather than after a poll interval.
		backlog := len(group) >= min(d.streamBatch, d.batch) && st.Delivered == len(group)
		d.mu.Lock()
		d.inFlight -= slots
		if haveOwner {
			if d.owners[owner] -= slots; d.owners[owner] <= 0 {
				delete(d.owners, owner)
			}
		}
		delete(d.busy, stream)
		wake := d.starved || backlog
		d.starved = false
		d.mu.Unlock()
		if wake {
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
	}()
	settle := context.WithoutCancel(ctx)

	ep, err := d.endpoints.Lookup(ctx, stream)
	switch {
	case errors.Is(err, ErrUnknownEndpoint):
		// The endpoint is gone from the registry: nobody can receive these any more.
		return d.abandon(ctx, group, ClassEndpointDeleted, "endpoint not found")
	case err == nil && !ep.DeletedAt.IsZero():
		// The endpoint was deleted: nobody can receive these any more. They stay retrievable by range.
		return d.abandon(ctx, group, ClassEndpointDeleted, "endpoint deleted")
	case err == nil && ep.DisabledReason != "":
		// Disabled: these are never pushed, so that enabling it again floods it with nothing; the
		// first delivery after shows the consumer the gap, which it fetches by range.
		return d.abandon(ctx, group, ClassEndpointDisabled, "endpoint disabled ("+ep.DisabledReason+")")
	case err != nil:
		// Our own outage, not the endpoint's failure: no attempt is counted, and the deliveries wait
		// as long as a first retry would. An empty Schedule (no retries) has no first delay; waiting
		// a poll interval then keeps the dispatcher from re-claiming them at once.
		wait := d.poll
		if len(d.schedule) > 0 {
			wait = d.schedule[0]
		}
		retry := d.now().Add(wait)
		if ctx.Err() != nil {
			retry = d.now()
		}
		d.logger.ErrorContext(ctx, "producer: endpoint lookup failed", "endpoint", stream, "error", err)
		return Stats{Released: d.release(settle, group, retry)}
	}

	// Take this endpoint's request slots within its licensee's share.
	d.mu.Lock()
	owner, haveOwner = ep.Owner, true
	if len(d.ownerOf) >= ownerCacheSize {
		clear(d.ownerOf)
	}
	d.ownerOf[stream] = owner
	room := d.perOwner - d.owners[owner]
	if room <= 0 {
		// The licensee's share is in use by its other endpoints: these wait for the next claim, which
		// skips the licensee's endpoints until a slot frees.
		haveOwner = false
		d.mu.Unlock()
		return Stats{Released: d.release(settle, group, d.now())}
	}
	want := min(d.perEndpoint, len(group), room)
	extra := min(want-1, max(d.workers-d.inFlight, 0))
	slots += extra
	d.inFlight += extra
	d.owners[owner] += slots
	d.mu.Unlock()

	st, h := d.deliverStream(ctx, ep, group, slots)
	if !h.resume.IsZero() {
		// Every settlement of the run is recorded: Run's claim at that time finds the endpoint free.
		d.noteDue(h.resume)
	}
	d.checkHealth(ctx, ep, h)
	return st
}

// abandon settles a group of deliveries as abandoned without a request: the endpoint is deleted or
// disabled. Each is recorded in the history with class and reason, and told to the hooks.
func (d *Dispatcher) abandon(ctx context.Context, group []driver.Delivery, class, reason string) Stats {
	at := d.now()
	for _, dl := range group {
		if o := d.hooks; o != nil {
			actx := o.attemptStart(ctx, attemptInfo(dl))
			o.attemptEnd(actx, AttemptResult{Endpoint: dl.Stream, EventType: dl.Event.Type, Outcome: driver.OutcomeAbandoned,
				Class: class})
		}
		d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Attempt: driver.Attempt{At: at, Class: class, Reason: reason}})
	}
	return Stats{Abandoned: len(group)}
}

// deliverStream delivers one endpoint's claimed deliveries in sequence order, window requests at a
// time, recording each outcome right after its attempt, and stops at the first failure. It returns
// what it did and what the run tells of the endpoint's health.
//
// A success is recorded while the next request goes out (the endpoint's order is the order of the
// requests, which recording does not change), and the worker waits for every record before it
// returns; a failure is recorded before anything else happens, because it decides when the rest go.
//
// A throttled endpoint (Endpoint.RateLimit) gets at most RateLimit requests a second: each window
// of n requests pushes the earliest start of the next one n/RateLimit seconds later. When that time
// has not come, the rest of the run is handed back, due then, and every settlement of the run holds
// the stream until then (driver.Settlement.Hold), so that no dispatcher — this one or a replica —
// claims it sooner; Run claims again at that time. Nothing waits on a timer meanwhile.
func (d *Dispatcher) deliverStream(ctx context.Context, ep Endpoint, group []driver.Delivery, window int) (Stats, runHealth) {
	var (
		st       Stats
		h        runHealth
		records  sync.WaitGroup
		interval time.Duration // between the starts of a throttled endpoint's requests; 0: not throttled
		hold     time.Time     // the earliest start of a throttled endpoint's next request
	)
	defer records.Wait()
	if ep.RateLimit > 0 {
		interval = time.Second / time.Duration(ep.RateLimit)
		window = min(window, ep.RateLimit)
	}
	settle := context.WithoutCancel(ctx)
	for i := 0; i < len(group); {
		if ctx.Err() != nil {
			st.Released += d.releaseHeld(settle, group[i:], d.now(), hold)
			return st, h
		}
		if interval > 0 && hold.After(d.now()) {
			// Throttled: the rest go when the rate allows, by a later claim.
			h.heldUntil(hold)
			st.Released += d.releaseHeld(settle, group[i:], hold, hold)
			return st, h
		}
		n := min(window, len(group)-i)
		results := make([]result, n)
		prepared := 0
		for k := range n {
			dl := group[i+k]
			body, sig, fail := d.prepare(ctx, ep, dl)
			// Checked after rendering, which may take any time, and right before the request, which
			// takes up to Timeout: the lease must outlast the request, or another replica could
			// re-claim the delivery and send it while ours is still in flight.
			if now := d.now(); ctx.Err() != nil || now.Add(d.timeout).After(dl.LeaseUntil) {
				break
			}
			results[k] = result{body: body, sig: sig, Attempt: fail}
			prepared++
		}
		if prepared == 0 {
			// Stopping, or the lease would run out during the request: hand the rest back for the next
			// claim (or another replica) instead of racing a re-claim.
			st.Released += d.releaseHeld(settle, group[i:], d.now(), hold)
			return st, h
		}
		if interval > 0 {
			hold = d.now().Add(time.Duration(prepared) * interval)
		}
		if prepared == 1 {
			d.attempt(ctx, ep, group[i], &results[0])
		} else {
			var wg sync.WaitGroup
			for k := range prepared {
				wg.Go(func() { d.attempt(ctx, ep, group[i+k], &results[k]) })
			}
			wg.Wait()
		}
		// Outcomes are recorded in sequence order; the first failure sends the rest behind it.
		for k := range prepared {
			dl, r := group[i+k], &results[k]
			h.note(dl.Sequence, r)
			if r.Class == "" {
				records.Go(func() {
					d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Delivered: true, Attempt: r.Attempt, Hold: hold})
				})
				st.Delivered++
				continue
			}
			if r.cancelled {
				// The request was cut short by our own shutdown, not by the endpoint: no attempt counted.
				st.Released += d.releaseHeld(settle, group[i+k:], r.At, hold)
				return st, h
			}
			st.add(d.recordFailure(ctx, dl, r, hold))
			h.heldUntil(r.held)
			retry := r.RetryAt
			if retry.IsZero() {
				retry = r.At // the rest need not wait for a delivery that will never be retried
			}
			// The endpoint just failed: the rest of its events wait for the failed one's retry, which
			// keeps them behind it in order and spares an endpoint that is down a burst of doomed
			// requests. Later ones of this window already went out; their outcomes are recorded.
			tail := results[k+1 : prepared]
			st.add(d.settleWindowTail(ctx, group[i+k+1:i+prepared], tail, hold))
			for j := range tail {
				h.note(group[i+k+1+j].Sequence, &tail[j])
				h.heldUntil(tail[j].held)
			}
			st.Released += d.releaseHeld(settle, group[i+prepared:], retry, hold)
			return st, h
		}
		i += prepared
	}
	return st, h
}
