// Package pgstore implements the library's storage interfaces on PostgreSQL with pgx v5, for teams
// that run several replicas: every replica that shares the database shares idempotency records,
// webhook event logs and cursors, version pins and credentials.
//
// Stores take a DB the caller owns — a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx — and never close it.
// Each store's tables live in a configurable schema; Migrate creates them. No store reads the clock:
// times are passed in by the packages that call it, so tests control time completely.
package pgstore
