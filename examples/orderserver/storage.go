package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/seal"
)

// openBackends connects the durable stores the environment names and returns a Config using them,
// with a function that closes the connections. With neither everything stays in memory (the zero
// Config). With SVC_POSTGRES_DSN every replica shares credentials, orders, endpoints, events, pins,
// the request log and the webhook portal's links and sessions, and — unless SVC_REDIS_URL moves them —
// idempotency records, so a retry that lands on another replica is recognised as one. SVC_REDIS_URL
// moves nothing else: the portal stays in PostgreSQL.
//
// Sandbox and production idempotency records are kept apart (their own table, or key prefix), so
// that an evaluation flooding the sandbox, which has no rate ceiling, never uses up production's
// capacity. On PostgreSQL a cleanup loop per table removes expired records until the returned
// function is called.
//
// ring, when not nil, seals the webhook signing secrets in PostgreSQL as well as the idempotency
// records (the caller sets Config.Sealer): at start the endpoints stored in clear, or under an older
// key of the ring, are sealed again under its first key, so that after a rotation the old key can
// leave SVC_SEAL_KEYS once every replica has started with the new ring.
func openBackends(ctx context.Context, pgDSN, redisURL, redisPrefix string, ring *seal.Ring, logger *slog.Logger) (server.Config, func(), error) {
	var cfg server.Config
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if pgDSN != "" {
		poolCfg, err := pgxpool.ParseConfig(pgDSN)
		if err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", EnvPostgresDSN, err)
		}
		// In transactional mode each mutating request holds a connection while its handler runs;
		// pgx's default (four on a small machine) would queue them. A DSN's pool_max_conns wins.
		if !strings.Contains(pgDSN, "pool_max_conns") {
			poolCfg.MaxConns = 32
		}
		pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
		if err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", EnvPostgresDSN, err)
		}
		closers = append(closers, pool.Close)
		if err := pool.Ping(ctx); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvPostgresDSN, err)
		}
		// Migrations are idempotent and serialised by advisory locks: replicas starting together are fine.
		if err := pgserver.Migrate(ctx, pool); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvPostgresDSN, err)
		}
		// Transactional mode: the claim, the order with its events, and the stored response commit in
		// one transaction, so a crash can never leave an order whose response a retry cannot replay.
		if cfg, err = pgserver.Config(pool, ring); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvPostgresDSN, err)
		}
		if ring != nil {
			n, err := cfg.Store.(*pgserver.Store).Reseal(ctx)
			if err != nil {
				closeAll()
				return cfg, nil, fmt.Errorf("-postgres: sealing webhook secrets with %s: %w", EnvSealKeys, err)
			}
			if n > 0 {
				logger.Info("webhook signing secrets sealed under the newest key of "+EnvSealKeys, "endpoints", n)
			}
		}
		// Retention that actually runs: expired records leave in bounded batches, every minute. And
		// the caches of credentials and pins, kept true by notifications from the database: a
		// revocation or a re-pin on any replica reaches this one within a second.
		cleanupCtx, stopCleanup := context.WithCancel(context.WithoutCancel(ctx))
		var cleanup sync.WaitGroup
		cleanup.Go(func() { _ = pgserver.RunCleanup(cleanupCtx, pool, logger) })
		listenCfg := cfg
		cleanup.Go(func() {
			if err := pgserver.Listen(cleanupCtx, listenCfg, logger); err != nil {
				logger.Error("the caches of credentials and pins do not listen: every request reads both tables", "error", err)
			}
		})
		closers = append(closers, func() { stopCleanup(); cleanup.Wait() })
	}
	if redisURL != "" {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvRedisURL, err)
		}
		client := redis.NewClient(opts)
		closers = append(closers, func() { _ = client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvRedisURL, err)
		}
		// Records in Redis cannot share a transaction with PostgreSQL: the ordinary mode (leases,
		// fencing) applies, and the order's own transaction still keeps it and its events together.
		// Refused unless the Redis runs with maxmemory-policy noeviction: an evicted record would let a
		// retry run its handler again. Tenants share the Redis, so each has a quota of records.
		idem, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{Prefix: redisPrefix, MaxRecordsPerScope: 100_000})
		if err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvRedisURL, err)
		}
		// The sandbox's records under a prefix of their own: with a Redis shared by both, a sandbox
		// flood fills the sandbox's quotas, never production's.
		sbx, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{Prefix: redisPrefix + "sandbox:", MaxRecordsPerScope: 100_000})
		if err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("%s: %w", EnvRedisURL, err)
		}
		cfg.Idempotency, cfg.SandboxIdempotency = idem, sbx
		cfg.Transactor, cfg.SandboxTransactor = nil, nil
		// The portal's links and sessions stay where they are: in PostgreSQL beside the credentials
		// whose principals they carry, where a spent link stays spent through a failover (Redis
		// replicates asynchronously) and nothing depends on Redis's persistence. Without PostgreSQL
		// the orders are in this process's memory, and so is the portal.
	}
	return cfg, closeAll, nil
}

func storageName(pgDSN, redisURL string) string {
	switch {
	case pgDSN != "" && redisURL != "":
		return "postgres+redis"
	case pgDSN != "":
		return "postgres"
	case redisURL != "":
		return "memory+redis"
	}
	return "memory"
}
