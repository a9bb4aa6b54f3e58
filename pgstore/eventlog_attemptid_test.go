package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// evlogAttempts makes n attempts on stream "we_mine" and, after each, others attempts on
// "we_theirs", one millisecond apart, and returns every attempt of each stream by paging the history
// through its cursor, newest first.
func evlogAttempts(t *testing.T, l *pgstore.EventLog, n, others int) (mine, theirs []driver.AttemptRecord) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []struct {
		stream string
		n      int
	}{{"we_mine", n}, {"we_theirs", n * others}} {
		for range s.n {
			_, err := l.Append(ctx, driver.StreamEvent{Stream: s.stream, Event: evlogEvent("order.created")})
			require.NoError(t, err)
		}
	}
	numberAll(t, l)
	at := evlogT0
	settle := func(stream, other string) {
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: at, LeaseUntil: at.Add(time.Minute), Limit: 1, PerStream: 1,
			Skip: []string{other}})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.NoError(t, l.Delivered(ctx, ds[0].Lease, driver.Attempt{At: at, StatusCode: 204}))
		at = at.Add(time.Millisecond)
	}
	for range n {
		settle("we_mine", "we_theirs")
		for range others {
			settle("we_theirs", "we_mine")
		}
	}
	all := func(stream string) []driver.AttemptRecord {
		var out []driver.AttemptRecord
		var before uint64
		for {
			page, more, err := l.Attempts(ctx, driver.AttemptQuery{Stream: stream, Limit: 7, Before: before})
			require.NoError(t, err)
			out = append(out, page...)
			if !more {
				return out
			}
			before = page[len(page)-1].ID
		}
	}
	return all("we_mine"), all("we_theirs")
}

// checkRandomAttemptIDs checks what issue 30 asks of attempt IDs: unique, in [1, 2^63), in no order
// that follows the attempts (a counter's would tell one tenant the others' volume), while the history
// itself is newest first by time.
func checkRandomAttemptIDs(t *testing.T, mine, theirs []driver.AttemptRecord) {
	t.Helper()
	seen := map[uint64]bool{}
	for _, recs := range [][]driver.AttemptRecord{mine, theirs} {
		for i, r := range recs {
			require.True(t, r.ID >= 1 && r.ID < 1<<63, "ID %d", r.ID)
			require.False(t, seen[r.ID], "attempt IDs are unique")
			seen[r.ID] = true
			if i > 0 {
				require.True(t, r.At.Before(recs[i-1].At), "newest first, by time: %v then %v", recs[i-1].At, r.At)
			}
		}
	}
	var ids []uint64
	for _, r := range slices.Backward(mine) {
		ids = append(ids, r.ID)
	}
	require.False(t, slices.IsSorted(ids), "my attempt IDs, oldest first, must not rise with time")
	steps := map[uint64]bool{}
	for i := 1; i < len(ids); i++ {
		steps[ids[i]-ids[i-1]] = true
	}
	require.Greater(t, len(steps), len(ids)/2, "no common step between consecutive IDs")
}

// TestEventLogAttemptIDsRandom (issue 30): the history's IDs came from an identity column, one
// counter for every tenant.
func TestEventLogAttemptIDsRandom(t *testing.T) {
	l, _, _ := newEventLog(t)
	mine, theirs := evlogAttempts(t, l, 40, 3)
	require.Len(t, mine, 40)
	require.Len(t, theirs, 120)
	checkRandomAttemptIDs(t, mine, theirs)

	// A cursor the log no longer holds ends the listing.
	got, more, err := l.Attempts(context.Background(), driver.AttemptQuery{Stream: "we_mine", Limit: 10, Before: 12345})
	require.NoError(t, err)
	require.False(t, more)
	require.Empty(t, got)
}

// TestEventLogAttemptIDsOnOlderTable: a history table an earlier version made, with an identity
// column, takes random IDs too once migrated, and lists by time.
func TestEventLogAttemptIDsOnOlderTable(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema, Table: "hooks"}
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, 1, opts))
	// As an earlier version left them: no version table either (migrations were not versioned then).
	_, err := pool.Exec(ctx, `DROP TABLE pgstore_migrations, hooks_attempts;
CREATE TABLE hooks_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text        NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    number      integer     NOT NULL,
    outcome     smallint    NOT NULL,
    at          timestamptz NOT NULL,
    latency_us  bigint      NOT NULL,
    status_code integer     NOT NULL,
    class       text        NOT NULL,
    reason      text        NOT NULL,
    response    text        NOT NULL,
    retry_at    timestamptz
);
CREATE INDEX hooks_attempts_stream_idx ON hooks_attempts (stream, id);
CREATE INDEX hooks_attempts_event_idx ON hooks_attempts (stream, seq, id);`)
	require.NoError(t, err)
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'hooks_attempts_order_idx'`,
		schema).Scan(&n))
	require.Equal(t, 1, n, "the order index is built on the older table")

	mine, theirs := evlogAttempts(t, must(pgstore.NewEventLog(pool, opts)), 30, 2)
	require.Len(t, mine, 30)
	checkRandomAttemptIDs(t, mine, theirs)
}
