package pgstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestEventLogStatsBucketMatchesGo: the SQL function that puts a latency in its histogram bucket
// (migration 5) agrees with driver.LatencyBucket at every bound, a microsecond either side, and for
// many other durations.
func TestEventLogStatsBucketMatchesGo(t *testing.T) {
	_, pool, opts := newEventLog(t)
	var us []int64
	for k := range 64 {
		b := int64(math.Round(1000 * math.Exp2(float64(k)/4)))
		us = append(us, b-1, b, b+1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		us = append(us, int64(math.Exp2(r.Float64()*28))) // 1 µs to 4.5 minutes, log-uniform
	}
	us = append(us, -1, 0, math.MaxInt64/int64(time.Microsecond)) // the longest time.Duration
	fn := pgx.Identifier{opts.Schema, pgstore.DefaultEventLogTable + "_stats_bucket"}.Sanitize()
	rows, err := pool.Query(context.Background(), "SELECT u, "+fn+"(u) FROM unnest($1::bigint[]) u", us)
	require.NoError(t, err)
	type pair struct {
		US     int64
		Bucket int32
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pair])
	require.NoError(t, err)
	require.Len(t, got, len(us))
	for _, p := range got {
		require.Equal(t, driver.LatencyBucket(time.Duration(p.US)*time.Microsecond), int(p.Bucket), "%d µs", p.US)
	}
}

// TestEventLogStatsCountEveryHistoryInsert: the statistics follow the history table, not Settle: a
// row inserted by another statement (as a redelivery would record its attempt) counts too, and one
// statement that brings a slot two buckets — the later one and one a ring's length earlier — counts
// the later and fails nothing. However long the history, a stream keeps 228 rows.
func TestEventLogStatsCountEveryHistoryInsert(t *testing.T) {
	ctx := context.Background()
	l, pool, opts := newEventLog(t)
	attempts := pgx.Identifier{opts.Schema, pgstore.DefaultEventLogTable + "_attempts"}.Sanitize()
	stats := pgx.Identifier{opts.Schema, pgstore.DefaultEventLogTable + "_stats"}.Sanitize()
	now := evlogT0.Add(30 * time.Minute)
	insert := func(stream string, ats []time.Time, outcome int16, latencyUS int64) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO `+attempts+` (id, stream, seq, event_id, number, outcome, at, latency_us,
			status_code, class, reason, response)
			SELECT (random() * 9e18)::bigint, $1, 1, 'evt_x', 1, $2, a, $3, 0, '', '', '' FROM unnest($4::timestamptz[]) a`,
			stream, outcome, latencyUS, ats)
		require.NoError(t, err)
	}
	insert("we_a", []time.Time{now, now.Add(-time.Minute)}, 2, 1500)
	insert("we_a", []time.Time{now.Add(-time.Hour - time.Second), now.Add(-10 * time.Second)}, 1, 2000) // one statement, one minute slot twice
	got, err := l.StreamStats(ctx, "we_a", now)
	require.NoError(t, err)
	require.Equal(t, [3]int{2, 1, 0}, [3]int{got.Hour.Delivered, got.Hour.Failed, got.Hour.Abandoned},
		"the attempt a ring's length late is not counted in the minute slot")
	require.Equal(t, [3]int{2, 2, 0}, [3]int{got.Day.Delivered, got.Day.Failed, got.Day.Abandoned},
		"it is in its hour slot")
	require.Equal(t, int64(2), got.Hour.Latency[driver.LatencyBucket(1500*time.Microsecond)])
	require.Equal(t, int64(1), got.Hour.Latency[driver.LatencyBucket(2*time.Millisecond)])
	// Several latency buckets for one slot in one statement, into a fresh slot and then onto it.
	for range 2 {
		_, err = pool.Exec(ctx, `INSERT INTO `+attempts+` (id, stream, seq, event_id, number, outcome, at, latency_us,
			status_code, class, reason, response)
			SELECT (random() * 9e18)::bigint, 'we_d', 1, 'evt_x', 1, 2, $1, l, 0, '', '', '' FROM unnest($2::bigint[]) l`,
			now, []int64{10, 1500, 1500, 60_000_000})
		require.NoError(t, err)
	}
	got, err = l.StreamStats(ctx, "we_d", now)
	require.NoError(t, err)
	var wantD driver.LatencyHistogram
	for range 2 {
		for _, us := range []int64{10, 1500, 1500, 60_000_000} {
			wantD.Add(time.Duration(us) * time.Microsecond)
		}
	}
	require.Equal(t, wantD, got.Hour.Latency)
	require.Equal(t, wantD, got.Week.Latency)

	// Ten days of attempts, one every 7 minutes (every minute slot comes round), in one statement;
	// the last 300 of them one by one.
	var ats []time.Time
	for at := now.Add(-240 * time.Hour); at.Before(now); at = at.Add(7 * time.Minute) {
		ats = append(ats, at)
	}
	insert("we_b", ats, 3, 10)
	for _, at := range ats[len(ats)-300:] {
		insert("we_c", []time.Time{at}, 3, 10)
	}
	var rowsB, rowsC int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE stream = 'we_b'), count(*) FILTER (WHERE stream = 'we_c') FROM `+stats).
		Scan(&rowsB, &rowsC))
	require.Equal(t, 60+168, rowsB, "two full rings")
	require.LessOrEqual(t, rowsC, 60+168)
	// The windows, counted from the attempts' times: the minutes, and hours, whose start is after
	// now less the window.
	want := func(ats []time.Time) [3]int {
		var w [3]int
		for _, at := range ats {
			if at.Truncate(time.Minute).After(now.Add(-time.Hour)) {
				w[0]++
			}
			if at.Truncate(time.Hour).After(now.Add(-24 * time.Hour)) {
				w[1]++
			}
			if at.Truncate(time.Hour).After(now.Add(-168 * time.Hour)) {
				w[2]++
			}
		}
		return w
	}
	for stream, ats := range map[string][]time.Time{"we_b": ats, "we_c": ats[len(ats)-300:]} {
		got, err = l.StreamStats(ctx, stream, now)
		require.NoError(t, err)
		require.Equal(t, want(ats), [3]int{got.Hour.Abandoned, got.Day.Abandoned, got.Week.Abandoned}, stream)
		require.Equal(t, int64(got.Week.Abandoned), got.Week.Latency[0], stream)
	}
}

// TestEventLogStatsMigration: migration 5 adopts a log with history (which it does not count) and
// counts what comes after; migrating again changes nothing.
func TestEventLogStatsMigration(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema}
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, 4, opts))
	l := must(pgstore.NewEventLog(pool, opts))
	for range 2 {
		_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
		require.NoError(t, err)
	}
	numberAll(t, l)
	deliver := func() {
		t.Helper()
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: evlogT0, LeaseUntil: evlogT0.Add(time.Minute), Limit: 1})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.NoError(t, l.Delivered(ctx, ds[0].Lease, driver.Attempt{At: evlogT0, Latency: time.Millisecond}))
	}
	deliver() // before the migration
	for range 2 {
		require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	}
	deliver()
	got, err := l.StreamStats(ctx, "we_a", evlogT0)
	require.NoError(t, err)
	require.Equal(t, 1, got.Hour.Delivered, "statistics start with the migration, and the trigger fires once")
	var triggers int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`,
		pgx.Identifier{schema, pgstore.DefaultEventLogTable + "_attempts"}.Sanitize()).Scan(&triggers))
	require.Equal(t, 1, triggers)
}
