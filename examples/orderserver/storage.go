package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/redisstore"
)

// openBackends connects the durable stores the flags name and returns a Config using them, with a
// function that closes the connections. With neither flag everything stays in memory (the zero
// Config). With -postgres every replica shares credentials, orders, endpoints, events and pins, and —
// unless -redis moves them — idempotency records, so a retry that lands on another replica is
// recognised as one.
func openBackends(ctx context.Context, pgDSN, redisURL, redisPrefix string) (server.Config, func(), error) {
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
			return cfg, nil, fmt.Errorf("-postgres: %w", err)
		}
		// In transactional mode each mutating request holds a connection while its handler runs;
		// pgx's default (four on a small machine) would queue them. A DSN's pool_max_conns wins.
		if !strings.Contains(pgDSN, "pool_max_conns") {
			poolCfg.MaxConns = 32
		}
		pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
		if err != nil {
			return cfg, nil, fmt.Errorf("-postgres: %w", err)
		}
		closers = append(closers, pool.Close)
		if err := pool.Ping(ctx); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("-postgres: %w", err)
		}
		// Migrations are idempotent and serialised by advisory locks: replicas starting together are fine.
		err = errors.Join(
			server.MigratePostgres(ctx, pool),
			pgstore.MigrateCredentials(ctx, pool, nil),
			pgstore.MigrateIdempotency(ctx, pool, nil),
			pgstore.MigratePinStore(ctx, pool, nil),
		)
		if err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("-postgres: migrate: %w", err)
		}
		cfg.Store = server.NewPostgresStore(pool)
		cfg.Credentials = pgstore.NewCredentialStore(pool, nil)
		cfg.Pins = pgstore.NewPinStore(pool, nil)
		// Transactional mode: the claim, the order with its events, and the stored response commit in
		// one transaction, so a crash can never leave an order whose response a retry cannot replay.
		cfg.Idempotency = pgstore.NewIdempotencyStore(pool, nil)
		cfg.Transactor = pgstore.NewTransactor(pool, nil)
	}
	if redisURL != "" {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("-redis: %w", err)
		}
		client := redis.NewClient(opts)
		closers = append(closers, func() { _ = client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			closeAll()
			return cfg, nil, fmt.Errorf("-redis: %w", err)
		}
		// Records in Redis cannot share a transaction with PostgreSQL: the ordinary mode (leases,
		// fencing) applies, and the order's own transaction still keeps it and its events together.
		cfg.Idempotency = redisstore.NewIdempotencyStore(client, &redisstore.IdempotencyOptions{Prefix: redisPrefix})
		cfg.Transactor = nil
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
