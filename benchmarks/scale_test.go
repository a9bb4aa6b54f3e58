package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// The knobs of the scale benchmarks (issue 37). The defaults keep CI's single pass (-benchtime 1x) of
// all of them to a few seconds; the full measurement (go run ./cmd/benchreport -scale, whose command
// docs/BENCHMARKS.md shows) raises them to a million events.
const (
	// envScaleEvents is the largest size: the top of the due backlog curve (which also measures a
	// hundredth and a tenth of it) and the events of the churn and retention case (default 1,000).
	envScaleEvents = "SVC_BENCH_SCALE_EVENTS"
	// envScaleFlow is the events appended, then delivered, per endpoint count of BenchmarkScaleFlow
	// (default 400).
	envScaleFlow = "SVC_BENCH_SCALE_FLOW"
	// envScaleSamples is the latency samples taken per measurement (default 5).
	envScaleSamples = "SVC_BENCH_SCALE_SAMPLES"
	// envScaleSampleSeconds caps the time one measurement samples for: past it, and once
	// minScaleSamples are in, it stops early and says how many it took (default 120). A design whose
	// claim takes a second at a million due events would otherwise take many minutes per row.
	envScaleSampleSeconds = "SVC_BENCH_SCALE_SAMPLE_SECONDS"
)

// minScaleSamples is the fewest samples a measurement takes, whatever its time cap.
const minScaleSamples = 5

// The shapes every run measures, whatever the knobs, so that the rows of one run compare with
// another's: the endpoint counts of issue 37's figures.
var (
	flowEndpoints  = []int{1, 100, 10_000} // BenchmarkScaleFlow
	claimEndpoints = []int{1, 10_000}      // BenchmarkScaleClaim: one stream, and the backlog spread thin
)

// The churn case's events go to churnEndpoints endpoints, appended, numbered and delivered
// churnRound at a time.
const (
	churnEndpoints = 100
	churnRound     = 10_000
)

// The batches of the loading phases: big, so that a million events load in minutes rather than
// hours on a design whose every statement walks what the previous ones left behind.
const (
	appendBatch = 10_000 // events per AppendBatch statement
	claimBatch  = 10_000 // deliveries per Claim
	// numberBatch is the loading Sequencer's Batch. One Sequence call takes a numbering lock per
	// stream of its batch, and the round robin puts every event of a batch on another stream: it
	// stays well inside PostgreSQL's shared lock table (max_locks_per_transaction × max_connections,
	// 6,400 by default), which other sessions share.
	numberBatch = 2_000
)

// settleBatch is the most settlements one Settle call carries while loading, as the Dispatcher's
// group commit does at most.
const settleBatch = 500

type scaleKnobs struct {
	events, flow, samples, clients int
	sampleBudget                   time.Duration
}

func loadScaleKnobs(tb testing.TB) scaleKnobs {
	tb.Helper()
	get := func(name string, def int) int { return envKnob(tb, name, def) }
	k := scaleKnobs{
		events:       get(envScaleEvents, 1_000),
		flow:         get(envScaleFlow, 400),
		samples:      get(envScaleSamples, minScaleSamples),
		clients:      get(envClients, 8),
		sampleBudget: time.Duration(get(envScaleSampleSeconds, 120)) * time.Second,
	}
	if k.events < 100 {
		tb.Fatalf("%s=%d: want at least 100 (the backlog curve measures a hundredth of it)", envScaleEvents, k.events)
	}
	return k
}

// --- the event log under load -----------------------------------------------------------------------

// scaleLog is an event log in a schema of its own with a fixed set of endpoints (streams), loaded
// through the public API only — AppendBatch, a producer.Sequencer, Claim and Settle — so that the
// benchmarks run unchanged whatever tables pgstore keeps behind it.
type scaleLog struct {
	pool    *pgxpool.Pool
	log     *pgstore.EventLog
	seq     *producer.Sequencer
	streams []string
	// appended and numbered count the events so far, perStream the events appended to each stream;
	// clock is the last instant a claim was made at.
	appended, numbered int
	perStream          []int
	clock              time.Time
	payload            []byte
}

func newScaleLog(tb testing.TB, dsn string, streams int) *scaleLog {
	tb.Helper()
	ctx := context.Background()
	pool := schemaPool(tb, dsn, 8, nil)
	if err := pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}); err != nil {
		tb.Fatal(err)
	}
	s := &scaleLog{pool: pool, log: must(pgstore.NewEventLog(pool, nil)), payload: eventPayload(0),
		perStream: make([]int, streams)}
	s.seq = must(producer.NewSequencer(s.log, &producer.SequencerOptions{Batch: numberBatch}))
	s.streams = make([]string, streams)
	for i := range s.streams {
		s.streams[i] = fmt.Sprintf("we_scale_%05d", i)
	}
	return s
}

// tick returns the instant of the next claim: now, or a second past the previous claim's instant if
// that is later. The benchmarks lease for a microsecond, so every claim finds the previous one's
// deliveries free again (its leases ended) and claims from the same backlog.
func (s *scaleLog) tick() time.Time {
	now := time.Now()
	if !now.After(s.clock) {
		now = s.clock.Add(time.Second)
	}
	s.clock = now
	return now
}

// appendN appends n events created now, round robin over the streams, in AppendBatch statements of
// appendBatch events.
func (s *scaleLog) appendN(ctx context.Context, n int) error {
	batch := make([]driver.StreamEvent, 0, min(n, appendBatch))
	for n > 0 {
		batch = batch[:0]
		created := time.Now().Unix()
		for range min(n, appendBatch) {
			i := (s.appended + len(batch)) % len(s.streams)
			s.perStream[i]++
			batch = append(batch, driver.StreamEvent{Stream: s.streams[i], Event: webhook.Event{
				Type: "order.created", Created: created, APIVersion: "v1", Data: s.payload}})
		}
		if _, err := s.log.AppendBatch(ctx, batch); err != nil {
			return err
		}
		s.appended += len(batch)
		n -= len(batch)
	}
	return nil
}

// numberAll has the sequencer number every event appended so far.
func (s *scaleLog) numberAll(ctx context.Context) error {
	for s.numbered < s.appended {
		n, err := s.seq.Drain(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%d of %d appended events numbered, and the sequencer finds nothing more", s.numbered, s.appended)
		}
		s.numbered += n
	}
	return nil
}

// deliverAll claims and settles as delivered every due delivery, n of them, through the calls a
// Dispatcher makes (Claim, then Settle in group-commit batches) but in claims of claimBatch, with no
// bound per endpoint and no HTTP: the rows written per event are a delivery's; only the wait is not.
func (s *scaleLog) deliverAll(ctx context.Context, n int) error {
	for done := 0; done < n; {
		now := s.tick()
		ds, err := s.log.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: min(claimBatch, n-done)})
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			return fmt.Errorf("%d of %d deliveries settled, and nothing more is due", done, n)
		}
		if err := s.settle(ctx, ds, now); err != nil {
			return err
		}
		done += len(ds)
	}
	return nil
}

// settle records every claimed delivery as delivered by a consumer that answered 204 in a
// millisecond.
func (s *scaleLog) settle(ctx context.Context, ds []driver.Delivery, at time.Time) error {
	for chunk := range slices.Chunk(ds, settleBatch) {
		ss := make([]driver.Settlement, len(chunk))
		for i, d := range chunk {
			ss[i] = driver.Settlement{Lease: d.Lease, Delivered: true,
				Attempt: driver.Attempt{At: at, Latency: time.Millisecond, StatusCode: http.StatusNoContent}}
		}
		if err := errors.Join(s.log.Settle(ctx, ss)...); err != nil {
			return err
		}
	}
	return nil
}

// loadRates are the rates of a grow's phases, in events per second of each phase.
type loadRates struct {
	appended, numbered, delivered float64
}

// report reports the rates as load-appended/s, load-numbered/s and (when it delivered) load-delivered/s:
// a design whose statements walk what earlier ones left behind shows it as a rate that falls as
// the log grows.
func (r loadRates) report(b *testing.B) {
	b.ReportMetric(r.appended, "load-appended/s")
	b.ReportMetric(r.numbered, "load-numbered/s")
	if r.delivered > 0 {
		b.ReportMetric(r.delivered, "load-delivered/s")
	}
}

// grow appends events until the log has had n, numbers them and, with deliver, delivers them, in
// rounds of round events (all at once when round is 0), so that the due backlog never exceeds a
// round.
func (s *scaleLog) grow(tb testing.TB, n, round int, deliver bool) loadRates {
	tb.Helper()
	ctx := context.Background()
	if round <= 0 {
		round = n
	}
	var appendT, numberT, deliverT time.Duration
	added := n - s.appended
	for s.appended < n {
		k := min(round, n-s.appended)
		t0 := time.Now()
		if err := s.appendN(ctx, k); err != nil {
			tb.Fatalf("append: %v", err)
		}
		t1 := time.Now()
		if err := s.numberAll(ctx); err != nil {
			tb.Fatalf("number: %v", err)
		}
		t2 := time.Now()
		if deliver {
			if err := s.deliverAll(ctx, k); err != nil {
				tb.Fatalf("deliver: %v", err)
			}
		}
		appendT, numberT, deliverT = appendT+t1.Sub(t0), numberT+t2.Sub(t1), deliverT+time.Since(t2)
	}
	r := loadRates{appended: perSecond(added, appendT), numbered: perSecond(added, numberT)}
	if deliver {
		r.delivered = perSecond(added, deliverT)
	}
	return r
}

// claimable is how many deliveries a dispatcherClaim leases when every appended event is due and
// none is leased: up to producer.DefaultStreamBatch of each stream, producer.DefaultBatchSize in all.
func (s *scaleLog) claimable() int {
	n := 0
	for _, k := range s.perStream {
		n += min(k, producer.DefaultStreamBatch)
	}
	return min(n, producer.DefaultBatchSize)
}

// --- sampling ---------------------------------------------------------------------------------------

// latencies collects samples of named timings.
type latencies map[string][]time.Duration

// sample calls fn (which adds to lat) k.samples × b.N times, or fewer once k.sampleBudget has passed
// and minScaleSamples ran, and reports how many it took.
func sample(b *testing.B, k scaleKnobs, fn func(lat latencies) error) latencies {
	b.Helper()
	lat := latencies{}
	want, start, n := k.samples*b.N, time.Now(), 0
	for ; n < want; n++ {
		if n >= minScaleSamples && time.Since(start) > k.sampleBudget {
			b.Logf("took %d of %d samples: the time cap (%s) passed", n, want, envScaleSampleSeconds)
			break
		}
		if err := fn(lat); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "samples")
	return lat
}

// report reports the p50 and p99 of a timing, as "<name>-p50-ms" and "<name>-p99-ms".
func (lat latencies) report(b *testing.B, name string) {
	ds := slices.Clone(lat[name])
	slices.Sort(ds)
	b.ReportMetric(ms(percentile(ds, 0.50)), name+"-p50-ms")
	b.ReportMetric(ms(percentile(ds, 0.99)), name+"-p99-ms")
}

func timed(lat latencies, name string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	lat[name] = append(lat[name], time.Since(t0))
	return err
}

// dispatcherClaim is the claim a Dispatcher with the default options makes when every worker is free.
func dispatcherClaim(now time.Time) driver.ClaimRequest {
	return driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Microsecond),
		Limit: producer.DefaultBatchSize, PerStream: producer.DefaultStreamBatch}
}

// --- BenchmarkScaleClaim ----------------------------------------------------------------------------

// BenchmarkScaleClaim measures a dispatcher's claim against the due backlog (issue 37: it must not
// grow with it). The backlog — SVC_BENCH_SCALE_EVENTS events and a hundredth and a tenth of that,
// the log grown from one size to the next — is appended and numbered, never delivered, on one
// endpoint and spread over 10,000 endpoints (round robin). Each sample is one EventLog.Claim as the
// Dispatcher makes it with its defaults (DefaultBatchSize in all, DefaultStreamBatch per endpoint),
// leasing for a microsecond and claiming a second after the previous sample, so every sample claims from the
// whole backlog. Reports claim-p50-ms, claim-p99-ms, claimed (deliveries per claim), samples, and
// the rates at which the log took the events added for the row (load-appended/s, load-numbered/s).
func BenchmarkScaleClaim(b *testing.B) {
	dsn := requireDSN(b)
	k := loadScaleKnobs(b)
	for _, endpoints := range claimEndpoints {
		b.Run(fmt.Sprintf("endpoints=%d", endpoints), func(b *testing.B) {
			s := newScaleLog(b, dsn, endpoints)
			for _, due := range []int{k.events / 100, k.events / 10, k.events} {
				load := s.grow(b, due, 0, false)
				b.Run(fmt.Sprintf("due=%d", due), func(b *testing.B) {
					load.report(b)
					ctx := context.Background()
					claimed := 0
					lat := sample(b, k, func(lat latencies) error {
						return timed(lat, "claim", func() error {
							ds, err := s.log.Claim(ctx, dispatcherClaim(s.tick()))
							claimed += len(ds)
							return err
						})
					})
					lat.report(b, "claim")
					b.ReportMetric(float64(claimed)/float64(len(lat["claim"])), "claimed")
					if want := s.claimable(); claimed != want*len(lat["claim"]) {
						b.Fatalf("claimed %d deliveries in %d claims, want %d each", claimed, len(lat["claim"]), want)
					}
				})
			}
		})
	}
}

// --- BenchmarkScaleChurn ----------------------------------------------------------------------------

// BenchmarkScaleChurn measures the log after SVC_BENCH_SCALE_EVENTS events went through it: appended,
// numbered and delivered (in rounds of 10,000, round robin over 100 endpoints, so that no backlog
// stands), which
// leaves a design that deletes and updates rows with that many dead ones unless it avoids them.
//
//   - latency: each sample appends one event, times the sequencer's pick that numbers it (pick) and
//     the dispatcher's claim that leases it (claim), settles it delivered, then times a pick and a
//     claim that find nothing (idle-pick, idle-claim: what an idle sequencer and dispatcher pay per
//     poll). Reports the p50 and p99 of each, samples, and the rates at which the log took the
//     churn (load-appended/s, load-numbered/s, load-delivered/s).
//   - cleanup: the retention removes every event (Dispatcher.Cleanup with its clock past the
//     retention, in EventLog.Cleanup batches of producer.CleanupBatch), with no VACUUM. Reports
//     cleanup-s, removed/s, batches, batch-size (producer.CleanupBatch), the mean time of the
//     first and last full batch and of each tenth of the batches (batch-d01-ms … batch-d10-ms: the
//     per-batch cost curve), and autovacuum (1 when the server runs it, 0 when it is off: the
//     figures must not depend on it).
func BenchmarkScaleChurn(b *testing.B) {
	dsn := requireDSN(b)
	k := loadScaleKnobs(b)
	build := func(tb testing.TB) (*scaleLog, loadRates) {
		s := newScaleLog(tb, dsn, churnEndpoints)
		return s, s.grow(tb, k.events, churnRound, true)
	}
	fixture, load := build(b)
	name := fmt.Sprintf("events=%d", k.events)
	b.Run(name+"/latency", func(b *testing.B) {
		load.report(b)
		ctx := context.Background()
		s := fixture
		lat := sample(b, k, func(lat latencies) error {
			if err := s.appendN(ctx, 1); err != nil {
				return err
			}
			var n int
			if err := timed(lat, "pick", func() (err error) { n, err = s.seq.Drain(ctx); return err }); err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("the pick numbered %d events, want 1", n)
			}
			s.numbered++
			var ds []driver.Delivery
			now := s.tick()
			if err := timed(lat, "claim", func() (err error) { ds, err = s.log.Claim(ctx, dispatcherClaim(now)); return err }); err != nil {
				return err
			}
			if len(ds) != 1 {
				return fmt.Errorf("the claim leased %d deliveries, want 1", len(ds))
			}
			if err := s.settle(ctx, ds, now); err != nil {
				return err
			}
			if err := timed(lat, "idle-pick", func() (err error) { n, err = s.seq.Drain(ctx); return err }); err != nil {
				return err
			}
			if n != 0 {
				return fmt.Errorf("the idle pick numbered %d events, want none", n)
			}
			return timed(lat, "idle-claim", func() error {
				ds, err := s.log.Claim(ctx, dispatcherClaim(s.tick()))
				if err == nil && len(ds) != 0 {
					err = fmt.Errorf("the idle claim leased %d deliveries", len(ds))
				}
				return err
			})
		})
		for _, name := range []string{"pick", "claim", "idle-pick", "idle-claim"} {
			lat.report(b, name)
		}
	})
	b.Run(name+"/cleanup", func(b *testing.B) {
		ctx := context.Background()
		var autovacuum string
		if err := fixture.pool.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil {
			b.Fatal(err)
		}
		var (
			batches []time.Duration
			total   time.Duration
			removed int
		)
		for i := range b.N {
			s := fixture
			if i > 0 { // the fixture is gone: a run of more than one iteration loads a new one each
				b.StopTimer()
				s, _ = build(b)
				b.StartTimer()
			}
			log := &timedCleanupLog{EventLog: s.log}
			// The Dispatcher's clock is past the retention of everything just appended.
			d := must(producer.NewDispatcher(log, must(memstore.NewEndpoints()), &producer.DispatcherOptions{
				Now: func() time.Time { return time.Now().Add(producer.DefaultRetention + 24*time.Hour) }}))
			t0 := time.Now()
			n, err := d.Cleanup(ctx)
			total += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if n != s.appended {
				b.Fatalf("the cleanup removed %d events of %d", n, s.appended)
			}
			removed += n
			batches = append(batches, log.full()...)
		}
		b.ReportMetric(total.Seconds()/float64(b.N), "cleanup-s")
		b.ReportMetric(perSecond(removed, total), "removed/s")
		b.ReportMetric(float64(len(batches)/b.N), "batches")
		b.ReportMetric(producer.CleanupBatch, "batch-size")
		reportCurve(b, batches[:len(batches)/b.N])
		on := 0.0
		if autovacuum == "on" {
			on = 1
		}
		b.ReportMetric(on, "autovacuum")
	})
}

// timedCleanupLog is the event log with the time of each Cleanup call (one batch) recorded. It embeds
// the *pgstore.EventLog, so the Dispatcher finds every optional interface the log has.
type timedCleanupLog struct {
	*pgstore.EventLog
	mu      sync.Mutex
	batches []cleanupBatch
}

type cleanupBatch struct {
	n int
	d time.Duration
}

func (l *timedCleanupLog) Cleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	t0 := time.Now()
	n, err := l.EventLog.Cleanup(ctx, before, limit)
	l.mu.Lock()
	l.batches = append(l.batches, cleanupBatch{n, time.Since(t0)})
	l.mu.Unlock()
	return n, err
}

// full returns the times of the batches that removed a full producer.CleanupBatch, in order.
func (l *timedCleanupLog) full() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, c := range l.batches {
		if c.n == producer.CleanupBatch {
			ds = append(ds, c.d)
		}
	}
	return ds
}

// reportCurve reports the first and last batch's time and the mean of each tenth of the batches.
func reportCurve(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(ms(ds[0]), "first-batch-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), "last-batch-ms")
	for d := range 10 {
		part := ds[d*len(ds)/10 : (d+1)*len(ds)/10]
		if len(part) == 0 {
			continue
		}
		var sum time.Duration
		for _, x := range part {
			sum += x
		}
		b.ReportMetric(ms(sum/time.Duration(len(part))), fmt.Sprintf("batch-d%02d-ms", d+1))
	}
}

// --- BenchmarkScaleFlow -----------------------------------------------------------------------------

// BenchmarkScaleFlow measures whether the dispatcher keeps up (issue 37: delivered/s at least
// appended/s) with 1, 100 and 10,000 endpoints, each its own licensee, and a fast consumer. As
// BenchmarkPGThroughput/events/ours does: SVC_BENCH_CLIENTS clients publish SVC_BENCH_SCALE_FLOW
// events round robin over the endpoints (each append its own commit), then one Dispatcher with its
// defaults (its own Sequencer numbering them; poll 10 ms) delivers every event to a local consumer
// that answers 204 at once and checks that each endpoint's sequences arrive 1, 2, 3, … with no gap
// and no reordering. With one endpoint this is the ordered stream's rate.
//
// Reports appended/s, delivered/s and their ratio, and the WAL the server wrote per event in each
// phase (wal-B/append, wal-B/delivery: numbering, claim, settle and history; from
// pg_current_wal_lsn, so other sessions' writes on a shared server count too).
func BenchmarkScaleFlow(b *testing.B) {
	dsn := requireDSN(b)
	k := loadScaleKnobs(b)
	for _, endpoints := range flowEndpoints {
		b.Run(fmt.Sprintf("endpoints=%d", endpoints), func(b *testing.B) { benchScaleFlow(b, dsn, k, endpoints) })
	}
}

func benchScaleFlow(b *testing.B, dsn string, k scaleKnobs, endpoints int) {
	ctx := context.Background()
	pool := schemaPool(b, dsn, 32, nil)
	if err := pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}); err != nil {
		b.Fatal(err)
	}
	log := must(pgstore.NewEventLog(pool, nil))
	cons := newOrderedConsumer(b)
	eps := make([]producer.Endpoint, endpoints)
	for i := range eps {
		id := fmt.Sprintf("we_flow_%05d", i)
		eps[i] = producer.Endpoint{ID: id, URL: cons.URL + "/hooks/" + id, Owner: fmt.Sprintf("lic_flow_%05d", i),
			Secrets: []string{webhook.NewSecret()}}
	}
	registry := must(memstore.NewEndpoints(eps...))
	pub := must(producer.NewPublisher(log, registry, nil))

	total, warm := k.flow*b.N, warmups(k.clients)
	payloads := make([][]byte, warm+total)
	for i := range payloads {
		payloads[i] = eventPayload(i)
	}
	publish := func(_, i int) error {
		_, err := pub.Publish(ctx, eps[i%len(eps)].ID, "order.created", payloads[i])
		return err
	}
	if err := runClients(k.clients, warm, publish); err != nil {
		b.Fatal(err)
	}
	wal0 := walLSN(b, pool)
	t0 := time.Now()
	if err := runClients(k.clients, total, func(c, i int) error { return publish(c, warm+i) }); err != nil {
		b.Fatal(err)
	}
	appendT := time.Since(t0)
	wal1 := walLSN(b, pool)

	// Loopback needs a client of its own (the default one dials public addresses only), with many
	// idle connections per host, since every endpoint is on the one consumer.
	transport := &http.Transport{Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	d := must(producer.NewDispatcher(log, registry, &producer.DispatcherOptions{
		Client: client, PollInterval: 10 * time.Millisecond, Retention: -1}))
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t1 := time.Now()
	running.Go(func() { _ = d.Run(runCtx) })
	waitErr := waitDelivered(ctx, &cons.got, warm+total, d.Backlog, deliveryDeadline(warm+total))
	deliverT := time.Since(t1)
	stop()
	running.Wait()
	if waitErr != nil {
		b.Fatal(waitErr)
	}
	wal2 := walLSN(b, pool)
	if err := cons.check(eps, warm+total); err != nil {
		b.Fatal(err)
	}

	appended, delivered := perSecond(total, appendT), perSecond(warm+total, deliverT)
	b.ReportMetric(float64((appendT+deliverT*time.Duration(total)/time.Duration(warm+total)).Nanoseconds())/float64(total), "ns/op")
	b.ReportMetric(appended, "appended/s")
	b.ReportMetric(delivered, "delivered/s")
	b.ReportMetric(delivered/appended, "ratio")
	b.ReportMetric(walDiff(b, pool, wal0, wal1)/float64(total), "wal-B/append")
	b.ReportMetric(walDiff(b, pool, wal1, wal2)/float64(warm+total), "wal-B/delivery")
}

// orderedConsumer is a local webhook consumer that answers 204 at once and keeps, per endpoint (the
// last element of the path), the sequences it got, in order of arrival.
type orderedConsumer struct {
	*httptest.Server
	got atomic.Int64
	mu  sync.Mutex
	seq map[string][]uint64
}

func newOrderedConsumer(tb testing.TB) *orderedConsumer {
	c := &orderedConsumer{seq: map[string][]uint64{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseUint(r.Header.Get("X-SVC-Sequence"), 10, 64)
		if err != nil {
			http.Error(w, "no sequence", http.StatusBadRequest)
			return
		}
		ep := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		c.mu.Lock()
		c.seq[ep] = append(c.seq[ep], n)
		c.mu.Unlock()
		c.got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(c.Close)
	return c
}

// check fails unless every endpoint got exactly its share of total events, as sequences 1, 2, 3, …
// in that order: with a consumer that never fails, the dispatcher has no reason to send one twice or
// out of order.
func (c *orderedConsumer) check(eps []producer.Endpoint, total int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ep := range eps {
		want := total / len(eps)
		if i < total%len(eps) {
			want++
		}
		got := c.seq[ep.ID]
		if len(got) != want {
			return fmt.Errorf("%s: the consumer got %d deliveries, want %d", ep.ID, len(got), want)
		}
		for j, n := range got {
			if n != uint64(j+1) {
				return fmt.Errorf("%s: delivery %d had sequence %d, want %d (out of order or repeated)", ep.ID, j+1, n, j+1)
			}
		}
	}
	return nil
}

// walLSN returns the server's current WAL insert position.
func walLSN(tb testing.TB, pool *pgxpool.Pool) string {
	var lsn string
	if err := pool.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		tb.Fatal(err)
	}
	return lsn
}

// walDiff returns the WAL bytes written between two positions.
func walDiff(tb testing.TB, pool *pgxpool.Pool, from, to string) float64 {
	var n float64
	if err := pool.QueryRow(context.Background(), "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8", to, from).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
