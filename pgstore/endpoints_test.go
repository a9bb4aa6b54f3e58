package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
)

// newEndpointStore migrates a fresh schema and returns an endpoint store on it.
func newEndpointStore(t testing.TB) (*pgstore.EndpointStore, *pgxpool.Pool, *pgstore.EndpointStoreOptions) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EndpointStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	s, err := pgstore.NewEndpointStore(pool, opts)
	require.NoError(t, err)
	return s, pool, opts
}

func TestEndpointStoreConformance(t *testing.T) {
	drivertest.RunEndpoints(t, func(t *testing.T) drivertest.Registry {
		s, _, _ := newEndpointStore(t)
		return s
	})
}

func TestNewEndpointStoreRefusals(t *testing.T) {
	_, err := pgstore.NewEndpointStore(nil, nil)
	require.ErrorContains(t, err, "pgstore: ")
	var pool *pgxpool.Pool // a DB is needed only to be non-nil here
	for name, opts := range map[string]*pgstore.EndpointStoreOptions{
		"table too long with its index suffix": {Table: strings.Repeat("t", 54)},
		"schema too long":                      {Schema: strings.Repeat("s", 64)},
		"NUL in the table":                     {Table: "hooks\x00"},
		"invalid UTF-8 in the schema":          {Schema: "s\xff"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := pgstore.NewEndpointStore(pool, opts)
			require.ErrorContains(t, err, "pgstore: ")
			require.Nil(t, s)
			_, err = pgstore.MigrationSQL(opts)
			require.Error(t, err)
			require.Error(t, pgstore.Migrate(context.Background(), pool, opts))
		})
	}
	_, err = pgstore.NewEndpointStore(pool, &pgstore.EndpointStoreOptions{Table: strings.Repeat("t", 53)})
	require.NoError(t, err, "63 bytes with the index suffix is the limit")
}

// TestEndpointStoreMigration: another schema and table; idempotent; and byte order even on a table
// created with the database's collation (as the reference server's own endpoint table was).
func TestEndpointStoreMigration(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EndpointStoreOptions{Schema: schema + "_x", Table: "hooks"}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{opts.Schema}.Sanitize()+` CASCADE`)
	})
	for range 2 {
		require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	}
	s, err := pgstore.NewEndpointStore(pool, opts)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{"whsec_x"}}))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{opts.Schema, "hooks"}.Sanitize()).Scan(&n))
	require.Equal(t, 1, n)

	// A table of the same columns made without COLLATE "C", under an ICU collation that sorts
	// case-insensitively first: the store still lists in byte order.
	_, err = pool.Exec(ctx, `CREATE TABLE legacy (id text COLLATE "und-x-icu" PRIMARY KEY, owner text NOT NULL,
    url text NOT NULL, secrets text[] NOT NULL, api_version text NOT NULL);
CREATE INDEX legacy_owner_idx ON legacy (owner, id)`)
	require.NoError(t, err)
	// Migrate adopts it: the lifecycle's columns are added, the collation left as it is.
	legacyOpts := &pgstore.EndpointStoreOptions{Schema: schema, Table: "legacy"}
	require.NoError(t, pgstore.Migrate(ctx, pool, legacyOpts))
	legacy, err := pgstore.NewEndpointStore(pool, legacyOpts)
	require.NoError(t, err)
	for _, id := range []string{"we_b", "we_B", "we_a"} {
		require.NoError(t, legacy.Put(ctx, producer.Endpoint{ID: id, URL: "https://a.example/", Owner: "lic_1", Secrets: []string{"whsec_x"}}))
	}
	eps, more, err := legacy.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"we_B", "we_a", "we_b"}, endpointIDs(eps))
	eps, _, err = legacy.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", After: "we_B", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"we_a", "we_b"}, endpointIDs(eps))
}

// TestEndpointStoreUnstorable: what PostgreSQL cannot store as text is refused before it reaches the
// server, whose error would quote the bytes; and can never be found.
func TestEndpointStoreUnstorable(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newEndpointStore(t)
	secret := "whsec_\xc3\x28secret"
	err := s.Put(ctx, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{secret}})
	require.ErrorIs(t, err, producer.ErrInvalidEndpoint)
	require.NotContains(t, err.Error(), "secret")
	require.ErrorIs(t, s.Put(ctx, producer.Endpoint{ID: "we_\x00", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{"whsec_x"}}),
		producer.ErrInvalidEndpoint)
	_, err = s.Lookup(ctx, "we_\x00")
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
	require.NoError(t, s.Delete(ctx, "we_\x00"))
	eps, more, err := s.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_\xff", Limit: 1})
	require.NoError(t, err)
	require.Empty(t, eps)
	require.False(t, more)
	_, _, err = s.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", After: "\x00", Limit: 1})
	require.ErrorIs(t, err, producer.ErrInvalidRange)
}

func endpointIDs(eps []producer.Endpoint) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = ep.ID
	}
	return out
}

// ownerFixture migrates an event log and an endpoint store into one schema and registers we_a1..3 for
// lic_a and we_b1 for lic_b.
func ownerFixture(t testing.TB) (*pgstore.EventLog, *pgxpool.Pool, *pgstore.EventLogOptions, *pgstore.EndpointStoreOptions) {
	t.Helper()
	l, pool, logOpts := newEventLog(t)
	epOpts := &pgstore.EndpointStoreOptions{Schema: logOpts.Schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, epOpts))
	eps, err := pgstore.NewEndpointStore(pool, epOpts)
	require.NoError(t, err)
	for _, ep := range [][2]string{{"we_a3", "lic_a"}, {"we_b1", "lic_b"}, {"we_a1", "lic_a"}, {"we_a2", "lic_a"}} {
		require.NoError(t, eps.Put(context.Background(), producer.Endpoint{ID: ep[0], URL: "https://consumer.example/" + ep[0],
			Owner: ep[1], Secrets: []string{webhook.NewSecret()}}))
	}
	return l, pool, logOpts, epOpts
}

// countingDB counts the statements sent through it.
type countingDB struct {
	pgstore.DB
	n atomic.Int64
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

// TestPublishToOwnerOutbox is fan-out in the transactional outbox on PostgreSQL: the listing and the
// append run in the order's transaction, in two statements; committed publications are numbered by
// the Sequencer per stream, gap-free; a rolled-back one leaves no event on any stream.
func TestPublishToOwnerOutbox(t *testing.T) {
	ctx := context.Background()
	l, pool, logOpts, epOpts := ownerFixture(t)
	_, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`)
	require.NoError(t, err)
	poolEps, err := pgstore.NewEndpointStore(pool, epOpts)
	require.NoError(t, err)
	pub, err := producer.NewPublisher(l, poolEps, &producer.PublisherOptions{Now: func() time.Time { return evlogT0 }})
	require.NoError(t, err)

	place := func(id string, commit bool) []webhook.Event {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id)
		require.NoError(t, err)
		db := &countingDB{DB: tx}
		txEps, err := pgstore.NewEndpointStore(db, epOpts)
		require.NoError(t, err)
		evs, err := pub.WithLog(must(pgstore.NewEventLog(db, logOpts))).WithEndpoints(txEps).
			PublishToOwner(ctx, "lic_a", "order.created", map[string]string{"id": id})
		require.NoError(t, err)
		require.Equal(t, int64(2), db.n.Load(), "one read of the endpoints, one statement for the events")
		if commit {
			require.NoError(t, tx.Commit(ctx))
		}
		return evs
	}
	first := place("ord_1", true)
	place("ord_2", false)
	third := place("ord_3", true)
	require.Equal(t, []string{"we_a1", "we_a2", "we_a3"}, []string{first[0].Endpoint, first[1].Endpoint, first[2].Endpoint})
	for _, e := range append(first, third...) {
		require.Zero(t, e.Sequence, "numbered after the commit")
	}

	seq, err := producer.NewSequencer(l, nil)
	require.NoError(t, err)
	n, err := seq.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, n, "two committed publications to three endpoints")
	for i, stream := range []string{"we_a1", "we_a2", "we_a3"} {
		evs, _, err := l.Range(ctx, stream, 1, math.MaxUint64, 10)
		require.NoError(t, err)
		require.Len(t, evs, 2, stream)
		require.Equal(t, []uint64{1, 2}, []uint64{evs[0].Sequence, evs[1].Sequence}, "gap-free: the rolled-back order took no number")
		require.Equal(t, first[i].ID, evs[0].ID)
		require.Equal(t, third[i].ID, evs[1].ID)
		require.JSONEq(t, `{"id":"ord_1"}`, string(evs[0].Data))
		require.JSONEq(t, `{"id":"ord_3"}`, string(evs[1].Data))
	}
	require.Empty(t, evlogSeqs(t, l, "we_b1"), "another owner's stream is untouched")

	// Registered in the same transaction: the new endpoint is published to, and both go with a
	// rollback.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	txEps, err := pgstore.NewEndpointStore(tx, epOpts)
	require.NoError(t, err)
	require.NoError(t, txEps.Put(ctx, producer.Endpoint{ID: "we_a4", URL: "https://consumer.example/a4", Owner: "lic_a",
		Secrets: []string{webhook.NewSecret()}}))
	evs, err := pub.WithLog(must(pgstore.NewEventLog(tx, logOpts))).WithEndpoints(txEps).PublishToOwner(ctx, "lic_a", "order.created", 1)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	require.NoError(t, tx.Rollback(ctx))
	n, err = seq.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the rolled-back publication left nothing to number")
	_, err = poolEps.Lookup(ctx, "we_a4")
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
}

// TestPublishToOwnerAllOrNothing: when the one statement fails for one endpoint's event, no endpoint
// gets one.
func TestPublishToOwnerAllOrNothing(t *testing.T) {
	ctx := context.Background()
	l, pool, logOpts, epOpts := ownerFixture(t)
	_, err := pool.Exec(ctx, `ALTER TABLE `+pgx.Identifier{logOpts.Schema, pgstore.DefaultEventLogTable + "_pending"}.Sanitize()+
		` ADD CONSTRAINT refuse_we_a3 CHECK (stream <> 'we_a3')`)
	require.NoError(t, err)
	eps, err := pgstore.NewEndpointStore(pool, epOpts)
	require.NoError(t, err)
	pub, err := producer.NewPublisher(l, eps, nil)
	require.NoError(t, err)
	_, err = pub.PublishToOwner(ctx, "lic_a", "order.created", 1)
	require.ErrorContains(t, err, "refuse_we_a3")
	require.Zero(t, numberAll(t, l))
	for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
		require.Empty(t, evlogSeqs(t, l, s))
	}
	// The owner without endpoints, on PostgreSQL too: nothing, no error.
	none, err := pub.PublishToOwner(ctx, "lic_nobody", "order.created", 1)
	require.NoError(t, err)
	require.Empty(t, none)
}

// BenchmarkPublishToOwnerPG publishes one business event to a licensee's 8 endpoints on the default
// pool: one read of the endpoint index, one INSERT of 8 events.
func BenchmarkPublishToOwnerPG(b *testing.B) {
	ctx := context.Background()
	l, pool, _ := newEventLog(b)
	epOpts := &pgstore.EndpointStoreOptions{}
	require.NoError(b, pgstore.Migrate(ctx, pool, epOpts))
	eps, err := pgstore.NewEndpointStore(pool, epOpts)
	require.NoError(b, err)
	for i := range 8 {
		require.NoError(b, eps.Put(ctx, producer.Endpoint{ID: fmt.Sprintf("we_%d", i), URL: "https://consumer.example/hooks",
			Owner: "lic_busy", Secrets: []string{webhook.NewSecret()}}))
	}
	pub, err := producer.NewPublisher(l, eps, nil)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		evs, err := pub.PublishToOwner(ctx, "lic_busy", "order.created", evlogBenchData)
		if err != nil || len(evs) != 8 {
			b.Fatal(err, len(evs))
		}
	}
	b.ReportMetric(float64(b.N*8)/b.Elapsed().Seconds(), "events/s")
}

// TestEndpointStoreEditsAcrossPools: two pools, as two replicas, PATCH, roll and delete one endpoint
// at once. Row locks serialise the updates: no change is lost (a counter in the metadata counts every
// update that succeeded), a roll never leaves more than two secrets, the sealed secrets always open,
// and after the delete every update fails with ErrUnknownEndpoint on both pools.
func TestEndpointStoreEditsAcrossPools(t *testing.T) {
	ctx := context.Background()
	ring := mustRing(t)
	_, pool1, opts := newEndpointStore(t)
	opts.Sealer = ring
	s1, err := pgstore.NewEndpointStore(pool1, opts)
	require.NoError(t, err)
	pool2, err := pgxpool.NewWithConfig(ctx, pool1.Config())
	require.NoError(t, err)
	defer pool2.Close()
	s2, err := pgstore.NewEndpointStore(pool2, opts)
	require.NoError(t, err)
	require.NoError(t, s1.CreateEndpoint(ctx, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1",
		Secrets: []string{webhook.NewSecret()}}, 0))

	var patches, rolls, after atomic.Int64
	deleted := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		s := s1
		if g%2 == 1 {
			s = s2
		}
		wg.Go(func() {
			for i := range 15 {
				_, err := s.UpdateEndpoint(ctx, "we_a", func(ep *producer.Endpoint) error {
					switch {
					case g == 0 && i == 10:
						ep.DeletedAt = time.Unix(1767225600, 0)
					case g%3 == 1: // a roll
						ep.Secrets, ep.OldSecretsExpire = []string{webhook.NewSecret(), ep.Secrets[0]}, time.Unix(1767225600, 0)
					default: // a PATCH: a new URL (the sealed secrets are bound to it) and the counter
						n, _ := strconv.Atoi(ep.Metadata["n"])
						ep.Metadata = map[string]string{"n": strconv.Itoa(n + 1)}
						ep.URL = fmt.Sprintf("https://a.example/%d/%d", g, i)
					}
					return nil
				})
				switch {
				case err == nil && g == 0 && i == 10:
					close(deleted)
				case err == nil && g%3 == 1:
					rolls.Add(1)
				case err == nil:
					patches.Add(1)
				case errors.Is(err, producer.ErrUnknownEndpoint):
					after.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-deleted:
	default:
		t.Fatal("the delete did not land")
	}
	for _, s := range []*pgstore.EndpointStore{s1, s2} {
		ep, err := s.Lookup(ctx, "we_a")
		require.NoError(t, err, "the sealed secrets open after every URL change")
		require.False(t, ep.DeletedAt.IsZero())
		require.LessOrEqual(t, len(ep.Secrets), 2)
		_, err = s.UpdateEndpoint(ctx, "we_a", func(*producer.Endpoint) error { return nil })
		require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
	}
	ep, err := s1.Lookup(ctx, "we_a")
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(patches.Load(), 10), ep.Metadata["n"], "every PATCH that succeeded is counted: none was lost")
	require.Positive(t, after.Load(), "updates came after the delete")
	t.Logf("%d patches and %d rolls before the delete, %d refused after it", patches.Load(), rolls.Load(), after.Load())
}

// BenchmarkEndpointStoreLookup is the Dispatcher's and the range handler's read of an endpoint with
// every setting in use, its secrets sealed: one read by primary key.
func BenchmarkEndpointStoreLookup(b *testing.B) {
	ctx := context.Background()
	_, pool, opts := newEndpointStore(b)
	opts.Sealer = mustRing(b)
	s, err := pgstore.NewEndpointStore(pool, opts)
	require.NoError(b, err)
	require.NoError(b, s.Put(ctx, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1",
		Secrets: []string{webhook.NewSecret(), webhook.NewSecret()}, OldSecretsExpire: time.Unix(1767225600, 0),
		EnabledEvents: []string{"order.created"}, Description: "EU desk", Metadata: map[string]string{"team": "payments"},
		Headers: map[string]string{"X-Tenant": "eu-1"}, Created: time.Unix(1767225600, 0)}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Lookup(ctx, "we_a"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEndpointStoreUpdate is one PATCH of an endpoint: a transaction that reads the row FOR
// UPDATE, seals the secrets again and writes the row back.
func BenchmarkEndpointStoreUpdate(b *testing.B) {
	ctx := context.Background()
	_, pool, opts := newEndpointStore(b)
	opts.Sealer = mustRing(b)
	s, err := pgstore.NewEndpointStore(pool, opts)
	require.NoError(b, err)
	require.NoError(b, s.CreateEndpoint(ctx, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1",
		Secrets: []string{webhook.NewSecret()}}, 0))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if _, err := s.UpdateEndpoint(ctx, "we_a", func(ep *producer.Endpoint) error {
			ep.Description = strconv.Itoa(n)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// mustRing is a key ring of one fresh key.
func mustRing(tb testing.TB) *seal.Ring {
	tb.Helper()
	k, err := seal.GenerateKey(1)
	require.NoError(tb, err)
	return must(seal.NewRing(k))
}
