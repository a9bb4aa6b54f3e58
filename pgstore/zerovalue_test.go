package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	idemdriver "github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestZeroValues: a store nobody built has no DB. Every method with an error result returns an error
// wrapping ErrNotBuilt, on the zero value and on a nil pointer, with arguments that would otherwise
// reach the database — never a nil-pointer panic, and never a silent "nothing to do". No server is
// needed.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1767225600, 0)
	key := idemdriver.Key{Scope: "s", Key: "k1"}
	ev := webhook.Event{Type: "order.created", Data: []byte(`{}`)}
	lease := driver.Lease{Stream: "we_1", Sequence: 1, Token: 1}
	claim := driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10}
	cred := apikey.Credential{ID: "key_1", Hash: apikey.HashKey("sk_sandbox_x"), Licensee: "lic_1", Environment: apikey.Sandbox, CreatedAt: now}
	log := &pgstore.EventLog{}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"CredentialStore.Put", func() error { return (&pgstore.CredentialStore{}).Put(ctx, cred) }},
		{"CredentialStore.Get", func() error { _, err := (&pgstore.CredentialStore{}).Get(ctx, cred.Hash); return err }},
		{"CredentialStore.Revoke", func() error { return (&pgstore.CredentialStore{}).Revoke(ctx, "key_1", now) }},
		{"CredentialStore.RevokeAll", func() error {
			_, err := (&pgstore.CredentialStore{}).RevokeAll(ctx, "lic_1", apikey.Sandbox, now)
			return err
		}},
		{"CredentialStore.Listen", func() error { return (&pgstore.CredentialStore{}).Listen(ctx, nil) }},
		{"nil CredentialStore.Get", func() error { _, err := (*pgstore.CredentialStore)(nil).Get(ctx, cred.Hash); return err }},
		{"CursorStore.Get", func() error { _, err := (&pgstore.CursorStore{}).Get(ctx, "we_1"); return err }},
		{"CursorStore.Advance", func() error { return (&pgstore.CursorStore{}).Advance(ctx, "we_1", 0, 1) }},
		{"CursorStore.AdvanceTx", func() error { return (&pgstore.CursorStore{}).AdvanceTx(ctx, nil, "we_1", 0, 1) }},
		{"CursorStore.ProcessInTx", func() error {
			process := (&pgstore.CursorStore{}).ProcessInTx(func(context.Context, pgx.Tx, webhook.Step) error { return nil })
			return process(ctx, webhook.Step{Stream: "we_1", Event: &webhook.Event{Sequence: 1}})
		}},
		{"nil CursorStore.Advance", func() error { return (*pgstore.CursorStore)(nil).Advance(ctx, "we_1", 0, 1) }},
		{"EndpointStore.Put", func() error {
			return (&pgstore.EndpointStore{}).Put(ctx, producer.Endpoint{ID: "we_1", URL: "https://example.com/hook", Secrets: []string{"whsec_x"}, Owner: "lic_1"})
		}},
		{"EndpointStore.Delete", func() error { return (&pgstore.EndpointStore{}).Delete(ctx, "we_1") }},
		{"EndpointStore.Lookup", func() error { _, err := (&pgstore.EndpointStore{}).Lookup(ctx, "we_1"); return err }},
		{"EndpointStore.ListEndpoints", func() error {
			_, _, err := (&pgstore.EndpointStore{}).ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", Limit: 10})
			return err
		}},
		{"EventLog.Append", func() error { _, err := log.Append(ctx, driver.StreamEvent{Stream: "we_1", Event: ev}); return err }},
		{"EventLog.AppendBatch", func() error {
			_, err := log.AppendBatch(ctx, []driver.StreamEvent{{Stream: "we_1", Event: ev}})
			return err
		}},
		{"EventLog.Sequence", func() error { _, err := log.Sequence(ctx, 10); return err }},
		{"EventLog.Unsequenced", func() error { _, err := log.Unsequenced(ctx); return err }},
		{"EventLog.Range", func() error { _, _, err := log.Range(ctx, "we_1", 1, 10, 10); return err }},
		{"EventLog.Claim", func() error { _, err := log.Claim(ctx, claim); return err }},
		{"EventLog.Delivered", func() error { return log.Delivered(ctx, lease, driver.Attempt{At: now}) }},
		{"EventLog.Failed", func() error { return log.Failed(ctx, lease, driver.Attempt{At: now}) }},
		{"EventLog.Settle", func() error { return log.Settle(ctx, []driver.Settlement{{Lease: lease, Delivered: true}})[0] }},
		{"EventLog.Attempts", func() error {
			_, _, err := log.Attempts(ctx, driver.AttemptQuery{Stream: "we_1", Limit: 10})
			return err
		}},
		{"EventLog.Release", func() error { return log.Release(ctx, lease, now) }},
		{"EventLog.Status", func() error { _, err := log.Status(ctx, "we_1", 1); return err }},
		{"EventLog.Cleanup", func() error { _, err := log.Cleanup(ctx, now, 10); return err }},
		{"EventLog.WithDB(tx).Claim", func() error { _, err := log.WithDB(fakeDB{}).Claim(ctx, claim); return err }},
		{"nil EventLog.Claim", func() error { _, err := (*pgstore.EventLog)(nil).Claim(ctx, claim); return err }},
		{"IdempotencyStore.Claim", func() error {
			_, err := (&pgstore.IdempotencyStore{}).Claim(ctx, key, idemdriver.Fingerprint{}, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}},
		{"IdempotencyStore.Renew", func() error { return (&pgstore.IdempotencyStore{}).Renew(ctx, key, 1, now) }},
		{"IdempotencyStore.Complete", func() error {
			return (&pgstore.IdempotencyStore{}).Complete(ctx, key, 1, idemdriver.Response{Status: 200}, now)
		}},
		{"IdempotencyStore.Release", func() error { return (&pgstore.IdempotencyStore{}).Release(ctx, key, 1) }},
		{"IdempotencyStore.Lookup", func() error { _, err := (&pgstore.IdempotencyStore{}).Lookup(ctx, key, now); return err }},
		{"IdempotencyStore.DeleteExpired", func() error { _, err := (&pgstore.IdempotencyStore{}).DeleteExpired(ctx, now, 100); return err }},
		{"IdempotencyStore.RunCleanup", func() error { return (&pgstore.IdempotencyStore{}).RunCleanup(ctx, nil) }},
		{"nil IdempotencyStore.Claim", func() error {
			_, err := (*pgstore.IdempotencyStore)(nil).Claim(ctx, key, idemdriver.Fingerprint{}, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}},
		{"PinStore.Get", func() error { _, err := (&pgstore.PinStore{}).Get(ctx, "lic_1"); return err }},
		{"PinStore.SetIfAbsent", func() error { _, _, err := (&pgstore.PinStore{}).SetIfAbsent(ctx, "lic_1", "v1", now); return err }},
		{"PinStore.CompareAndSwap", func() error {
			_, err := (&pgstore.PinStore{}).CompareAndSwap(ctx, "lic_1", "v1", "v2", now)
			return err
		}},
		{"PinStore.Delete", func() error { return (&pgstore.PinStore{}).Delete(ctx, "lic_1") }},
		{"PinStore.List", func() error { _, err := (&pgstore.PinStore{}).List(ctx, "v1", "", 10); return err }},
		{"PinStore.Listen", func() error { return (&pgstore.PinStore{}).Listen(ctx, nil) }},
		{"PortalStore.Put", func() error {
			return (&pgstore.PortalStore{}).Put(ctx, "k", portal.Session{Licensee: "lic_1", ExpiresAt: now}, now)
		}},
		{"PortalStore.Get", func() error { _, err := (&pgstore.PortalStore{}).Get(ctx, "k", now); return err }},
		{"PortalStore.Take", func() error { _, err := (&pgstore.PortalStore{}).Take(ctx, "k", now); return err }},
		{"PortalStore.Delete", func() error { return (&pgstore.PortalStore{}).Delete(ctx, "k") }},
		{"nil PortalStore.Take", func() error { _, err := (*pgstore.PortalStore)(nil).Take(ctx, "k", now); return err }},
		{"Transactor.InTx", func() error {
			return (&pgstore.Transactor{}).InTx(ctx, func(context.Context, idemdriver.Store) error {
				t.Error("fn ran on a zero Transactor")
				return nil
			})
		}},
		{"nil Transactor.InTx", func() error {
			return (*pgstore.Transactor)(nil).InTx(ctx, func(context.Context, idemdriver.Store) error { return nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, pgstore.ErrNotBuilt)
		})
	}
}

// fakeDB is a DB that is never called: WithDB on a zero EventLog must not make it usable.
type fakeDB struct{ pgstore.DB }
