package benchmarks

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/internal/testkit/serviceprobe"
	"github.com/svcplatform/conventions/internal/testkit/testid"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/redisstore"
)

// The variables that name the real servers, as in the adapters' own tests: unset, their benchmarks
// skip; set but not answering, they fail, at once (one short probe per test binary).
const (
	envPostgres = "SVC_TEST_POSTGRES_DSN"
	envRedis    = "SVC_TEST_REDIS_URL"
)

// postgresAnswers fails tb unless a PostgreSQL answers at the address dsn names.
func postgresAnswers(tb testing.TB, dsn string) {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("%s: %v", envPostgres, err)
	}
	network, addr := serviceprobe.PostgresAddr(cfg.Host, cfg.Port)
	if err := serviceprobe.Check(serviceprobe.Target{Env: envPostgres, Value: dsn, Server: "PostgreSQL",
		Network: network, Addr: addr, Probe: serviceprobe.Postgres}); err != nil {
		tb.Fatal(err)
	}
}

// redisAnswers fails tb unless a Redis answers at the address opts (parsed from url) names.
func redisAnswers(tb testing.TB, url string, opts *redis.Options) {
	tb.Helper()
	probe := serviceprobe.Redis
	if opts.TLSConfig != nil {
		probe = nil // rediss://: the dial decides; the client's own PING checks the rest
	}
	if err := serviceprobe.Check(serviceprobe.Target{Env: envRedis, Value: url, Server: "Redis",
		Network: opts.Network, Addr: opts.Addr, Probe: probe}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkStore runs the driver.Store conformance benchmarks on every backend.
func BenchmarkStore(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		// The write benchmarks keep about 20,000 records of one scope: above the default quota.
		storetest.RunBenchmarks(b, func(*testing.B) driver.Store {
			return memstore.New(&memstore.Options{MaxRecordsPerScope: 50_000})
		})
	})
	b.Run("redis", func(b *testing.B) {
		client, prefix := redisClient(b)
		storetest.RunBenchmarks(b, func(*testing.B) driver.Store {
			s, err := redisstore.NewIdempotencyStore(context.Background(), client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			return s
		})
	})
	b.Run("postgres", func(b *testing.B) {
		pool, schema := postgresPool(b)
		opts := &pgstore.IdempotencyStoreOptions{Schema: schema}
		if err := pgstore.Migrate(context.Background(), pool, opts); err != nil {
			b.Fatal(err)
		}
		storetest.RunBenchmarks(b, func(*testing.B) driver.Store { return must(pgstore.NewIdempotencyStore(pool, opts)) })
	})
}

// redisClient connects to the Redis named by SVC_TEST_REDIS_URL and returns a key prefix of this
// run's own; every key under it is deleted when the benchmark ends.
func redisClient(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	url := os.Getenv(envRedis)
	if url == "" {
		tb.Skipf("%s is not set: skipping the Redis store", envRedis)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("%s: %v", envRedis, err)
	}
	redisAnswers(tb, url, opts)
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		tb.Fatalf("%s is set but Redis does not answer: %v", envRedis, err)
	}
	prefix := testid.New("svcbench_") + ":"
	tb.Cleanup(func() {
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				if err := client.Unlink(ctx, keys...).Err(); err != nil {
					tb.Errorf("redis cleanup: %v", err)
					return
				}
				keys = keys[:0]
			}
		}
		if err := iter.Err(); err != nil {
			tb.Errorf("redis cleanup: %v", err)
			return
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil {
				tb.Errorf("redis cleanup: %v", err)
			}
		}
	})
	return client, prefix
}

// postgresPool connects to the PostgreSQL named by SVC_TEST_POSTGRES_DSN and creates a schema of this
// run's own, dropped when the benchmark ends.
func postgresPool(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	dsn := os.Getenv(envPostgres)
	if dsn == "" {
		tb.Skipf("%s is not set: skipping the PostgreSQL store", envPostgres)
	}
	postgresAnswers(tb, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		tb.Fatalf("%s: %v", envPostgres, err)
	}
	schema := testid.New("svcbench_")
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		tb.Fatalf("%s is set but PostgreSQL does not answer: %v", envPostgres, err)
	}
	tb.Cleanup(func() {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return pool, schema
}
