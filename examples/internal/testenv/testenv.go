// Package testenv connects the examples' tests to the real PostgreSQL and Redis named by
// SVC_TEST_POSTGRES_DSN and SVC_TEST_REDIS_URL. Each test gets a schema (PostgreSQL) or key prefix
// (Redis) of its own, removed when it ends. Tests skip when a variable is unset and fail when it is set
// but the server does not answer, so CI, which sets both, never skips silently. Whether a server answers
// is probed once per test binary, within seconds (internal/testkit/serviceprobe), so that a variable
// that names a dead address fails every test that needs it at once, naming the variable and the
// address.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/internal/testkit/serviceprobe"
)

// The variables that name the test servers.
const (
	EnvPostgres = "SVC_TEST_POSTGRES_DSN"
	EnvRedis    = "SVC_TEST_REDIS_URL"
)

func suffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// PostgresDSN creates a fresh schema on the test database and returns a DSN whose search_path is that
// schema, so a program started with it (a process, even) creates and finds every table there. The
// schema is dropped when the test ends. It skips the test when SVC_TEST_POSTGRES_DSN is unset.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(EnvPostgres)
	if base == "" {
		tb.Skipf("%s is not set: skipping a test that needs a real PostgreSQL", EnvPostgres)
	}
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", EnvPostgres, err)
	}
	network, addr := serviceprobe.PostgresAddr(cfg.Host, cfg.Port)
	if err := serviceprobe.Check(serviceprobe.Target{Env: EnvPostgres, Value: base, Server: "PostgreSQL",
		Network: network, Addr: addr, Probe: serviceprobe.Postgres}); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	schema := "ex_" + suffix()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("testenv: %s is set but PostgreSQL does not answer: %v", EnvPostgres, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("testenv: create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("testenv: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("testenv: drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(tb, base, schema)
}

// withSearchPath adds "-c search_path=<schema>" to the DSN's startup options, in either DSN form.
func withSearchPath(tb testing.TB, dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			tb.Fatalf("testenv: parse %s: %v", EnvPostgres, err)
		}
		q := u.Query()
		q.Set("options", strings.TrimSpace(q.Get("options")+" -csearch_path="+schema))
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " options='-csearch_path=" + schema + "'"
}

// PostgresPool is PostgresDSN with a pool on it, closed when the test ends.
func PostgresPool(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	dsn := PostgresDSN(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		tb.Fatalf("testenv: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool, dsn
}

// Redis returns the test Redis URL and a fresh key prefix; every key under the prefix is deleted when
// the test ends. It skips the test when SVC_TEST_REDIS_URL is unset.
func Redis(tb testing.TB) (redisURL, prefix string) {
	tb.Helper()
	redisURL = os.Getenv(EnvRedis)
	if redisURL == "" {
		tb.Skipf("%s is not set: skipping a test that needs a real Redis", EnvRedis)
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", EnvRedis, err)
	}
	probe := serviceprobe.Redis
	if opts.TLSConfig != nil {
		probe = nil // rediss://: the dial decides; the PING below checks the rest
	}
	if err := serviceprobe.Check(serviceprobe.Target{Env: EnvRedis, Value: redisURL, Server: "Redis",
		Network: opts.Network, Addr: opts.Addr, Probe: probe}); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		tb.Fatalf("testenv: %s is set but Redis does not answer: %v", EnvRedis, err)
	}
	prefix = "ex_" + suffix() + ":"
	tb.Cleanup(func() {
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			if err := client.Del(ctx, keys...).Err(); err != nil {
				tb.Errorf("testenv: delete keys under %s: %v", prefix, err)
			}
		}
	})
	return redisURL, prefix
}
