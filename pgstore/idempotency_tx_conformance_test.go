package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/pgstore"
)

// idemTxPerCall is an driver.Store that runs every call in a transaction of its own through a
// Transactor, and commits it unless the call failed: the conformance suite then exercises the
// transactional claim (advisory locks, mark and take-over) with its writes made visible to the next
// call, as a request's transaction makes them when it commits.
type idemTxPerCall struct{ tr *pgstore.Transactor }

var _ driver.Store = idemTxPerCall{}

func (s idemTxPerCall) do(ctx context.Context, fn func(ctx context.Context, st driver.Store) error) error {
	return s.tr.InTx(ctx, fn)
}

func (s idemTxPerCall) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (c driver.Claim, err error) {
	err = s.do(ctx, func(ctx context.Context, st driver.Store) error {
		c, err = st.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
		return err
	})
	if err != nil {
		return driver.Claim{}, err
	}
	return c, nil
}

func (s idemTxPerCall) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	return s.do(ctx, func(ctx context.Context, st driver.Store) error { return st.Renew(ctx, key, token, leaseUntil) })
}

func (s idemTxPerCall) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	return s.do(ctx, func(ctx context.Context, st driver.Store) error {
		return st.Complete(ctx, key, token, resp, expiresAt)
	})
}

func (s idemTxPerCall) Release(ctx context.Context, key driver.Key, token uint64) error {
	return s.do(ctx, func(ctx context.Context, st driver.Store) error { return st.Release(ctx, key, token) })
}

func (s idemTxPerCall) Lookup(ctx context.Context, key driver.Key, now time.Time) (rec driver.Record, err error) {
	err = s.do(ctx, func(ctx context.Context, st driver.Store) error {
		rec, err = st.Lookup(ctx, key, now)
		return err
	})
	return rec, err
}

// TestTransactorStoreConformance runs the Store contract against the transactional store, one
// committed transaction per call, racing claims included: the advisory locks must never turn a
// committed answer into a wrong one, and the mark and take-over of an ended lease work as in store
// mode.
func TestTransactorStoreConformance(t *testing.T) {
	_, pool, schema := newIdemStore(t)
	tr := must(pgstore.NewTransactor(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	storetest.Run(t, func(*testing.T) driver.Store { return idemTxPerCall{tr} })
}
