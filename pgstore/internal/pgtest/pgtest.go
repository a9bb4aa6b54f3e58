// Package pgtest gives each test its own schema on the real PostgreSQL named by SVC_TEST_POSTGRES_DSN.
// Tests skip when the variable is unset and fail when it is set but the server does not answer, so that
// CI (which sets it) never skips silently. Whether it answers is probed once per test binary, within
// seconds (internal/testkit/serviceprobe): a variable that names a dead address fails every test that
// needs it at once, with a message that names the variable and the address.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/internal/testkit/serviceprobe"
	"github.com/svcplatform/conventions/internal/testkit/testid"
)

// EnvDSN is the variable that names the test database.
const EnvDSN = "SVC_TEST_POSTGRES_DSN"

// DSN returns the test DSN, skipping the test when it is unset and failing it when nothing answers
// at the address it names.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		tb.Skipf("%s is not set: skipping a test that needs a real PostgreSQL", EnvDSN)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", EnvDSN, err)
	}
	// With several hosts (fallbacks) the first decides: the test servers are one server.
	network, addr := serviceprobe.PostgresAddr(cfg.Host, cfg.Port)
	if err := serviceprobe.Check(serviceprobe.Target{Env: EnvDSN, Value: dsn, Server: "PostgreSQL",
		Network: network, Addr: addr, Probe: serviceprobe.Postgres}); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Pool connects to the test database and creates a fresh schema that is dropped when the test ends.
// It returns the pool (closed at the end of the test) and the schema's name. The pool's search_path is
// the new schema, so unqualified names land there too.
func Pool(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	dsn := DSN(tb)
	schema := testid.New("t_")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: %s is set but PostgreSQL does not answer: %v", EnvDSN, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("pgtest: parse DSN: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: pool: %v", err)
	}
	tb.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return pool, schema
}
