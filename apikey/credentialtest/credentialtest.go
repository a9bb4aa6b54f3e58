package credentialtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/check"
)

// epoch is a fixed instant: the suite never reads the clock.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// Run runs the suite. newStore must return a fresh, empty store on every call.
func Run(t *testing.T, newStore func(t *testing.T) apikey.CredentialStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s apikey.CredentialStore)
	}{
		{"PutGet", testPutGet},
		{"NeverExpires", testNeverExpires},
		{"GetUnknown", testGetUnknown},
		{"DuplicateID", testDuplicateID},
		{"DuplicateHash", testDuplicateHash},
		{"InvalidCredential", testInvalid},
		{"Revoke", testRevoke},
		{"RevokeEarlierWins", testRevokeEarlierWins},
		{"RevokeUnknown", testRevokeUnknown},
		{"RevokeZeroTime", testRevokeZero},
		{"RevokeAll", testRevokeAll},
		{"ConcurrentPutSameID", testConcurrentPut},
		{"ConcurrentRevoke", testConcurrentRevoke},
		{"CanceledContext", testCanceled},
		{"Permissions", testPermissions},
		{"Lookup", testLookup},
		{"ListActive", testList},
		{"Roll", testRoll},
		{"RollRefused", testRollRefused},
		{"ConcurrentRoll", testConcurrentRoll},
		{"MarkUsed", testMarkUsed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// Credential returns a valid credential for n: distinct IDs and hashes per n.
func Credential(n int, licensee string, env apikey.Environment) apikey.Credential {
	return apikey.Credential{
		ID:          fmt.Sprintf("key_test%04d", n),
		Hash:        apikey.HashKey(fmt.Sprintf("key-material-%d-%s-%s", n, licensee, env)),
		Licensee:    licensee,
		Environment: env,
		CreatedAt:   epoch,
		ExpiresAt:   epoch.Add(30 * 24 * time.Hour),
	}
}

// RequireSame fails unless got and want are the same credential, times compared with Equal.
func RequireSame(t testing.TB, want, got apikey.Credential) {
	t.Helper()
	check.Equal(t, want.ID, got.ID, "ID")
	check.Equal(t, want.Hash, got.Hash, "Hash of %s", want.ID)
	check.Equal(t, want.Licensee, got.Licensee, "Licensee of %s", want.ID)
	check.Equal(t, want.Environment, got.Environment, "Environment of %s", want.ID)
	requireTime(t, want.ID+" CreatedAt", want.CreatedAt, got.CreatedAt)
	requireTime(t, want.ID+" ExpiresAt", want.ExpiresAt, got.ExpiresAt)
	requireTime(t, want.ID+" RevokedAt", want.RevokedAt, got.RevokedAt)
	requireTime(t, want.ID+" LastUsedAt", want.LastUsedAt, got.LastUsedAt)
	check.Equal(t, want.Permissions == nil, got.Permissions == nil, "%s: a full key (nil Permissions) must stay full, a restricted one restricted", want.ID)
	check.Equal(t, want.Permissions, got.Permissions, "Permissions of %s", want.ID)
}

func requireTime(t testing.TB, name string, want, got time.Time) {
	t.Helper()
	check.Instant(t, want, got, name)
}

func testPutGet(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	b := Credential(2, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, a))
	check.NoError(t, s.Put(ctx, b))
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err)
	RequireSame(t, a, got)
	got, err = s.Get(ctx, b.Hash)
	check.NoError(t, err)
	RequireSame(t, b, got)
}

func testNeverExpires(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	c := Credential(1, "lic_a", apikey.Live)
	c.ExpiresAt = time.Time{}
	check.NoError(t, s.Put(ctx, c))
	got, err := s.Get(ctx, c.Hash)
	check.NoError(t, err)
	check.Instant(t, time.Time{}, got.ExpiresAt, "a zero ExpiresAt (never expires) must come back zero")
	check.Instant(t, time.Time{}, got.RevokedAt, "RevokedAt of a credential never revoked")
}

func testGetUnknown(t *testing.T, s apikey.CredentialStore) {
	_, err := s.Get(context.Background(), apikey.HashKey("nobody"))
	check.ErrorIs(t, err, apikey.ErrCredentialNotFound)
}

func testDuplicateID(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	check.NoError(t, s.Put(ctx, a))
	b := Credential(2, "lic_b", apikey.Sandbox)
	b.ID = a.ID
	check.ErrorIs(t, s.Put(ctx, b), apikey.ErrDuplicateCredential)
	_, err := s.Get(ctx, b.Hash)
	check.ErrorIs(t, err, apikey.ErrCredentialNotFound, "a refused Put must store nothing")
}

func testDuplicateHash(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	check.NoError(t, s.Put(ctx, a))
	b := Credential(2, "lic_b", apikey.Live)
	b.Hash = a.Hash
	check.ErrorIs(t, s.Put(ctx, b), apikey.ErrDuplicateCredential)
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err)
	RequireSame(t, a, got)
}

func testInvalid(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	for name, mutate := range map[string]func(*apikey.Credential){
		"no ID":           func(c *apikey.Credential) { c.ID = "" },
		"no licensee":     func(c *apikey.Credential) { c.Licensee = "" },
		"no environment":  func(c *apikey.Credential) { c.Environment = "" },
		"bad environment": func(c *apikey.Credential) { c.Environment = "test" },
		"no hash":         func(c *apikey.Credential) { c.Hash = apikey.KeyHash{} },
		"no permission":   func(c *apikey.Credential) { c.Permissions = []string{} },
		"bad permission":  func(c *apikey.Credential) { c.Permissions = []string{"orders:delete"} },
	} {
		t.Run(name, func(t *testing.T) {
			c := Credential(1, "lic_a", apikey.Sandbox)
			mutate(&c)
			check.ErrorIs(t, s.Put(ctx, c), apikey.ErrInvalidCredential)
		})
	}
}

func testRevoke(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	b := Credential(2, "lic_a", apikey.Sandbox)
	check.NoError(t, s.Put(ctx, a))
	check.NoError(t, s.Put(ctx, b))
	at := epoch.Add(time.Hour)
	check.NoError(t, s.Revoke(ctx, a.ID, at))
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err, "a revoked credential is still returned; the caller decides with its clock")
	a.RevokedAt = at
	RequireSame(t, a, got)
	got, err = s.Get(ctx, b.Hash)
	check.NoError(t, err)
	RequireSame(t, b, got) // untouched
}

func testRevokeEarlierWins(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, a))
	scheduled := epoch.Add(24 * time.Hour)
	check.NoError(t, s.Revoke(ctx, a.ID, scheduled))
	check.NoError(t, s.Revoke(ctx, a.ID, scheduled.Add(time.Hour)), "a later instant must not postpone")
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err)
	requireTime(t, "RevokedAt", scheduled, got.RevokedAt)
	sooner := epoch.Add(time.Minute)
	check.NoError(t, s.Revoke(ctx, a.ID, sooner), "an earlier instant brings the revocation forward")
	got, err = s.Get(ctx, a.Hash)
	check.NoError(t, err)
	requireTime(t, "RevokedAt", sooner, got.RevokedAt)
}

func testRevokeUnknown(t *testing.T, s apikey.CredentialStore) {
	check.ErrorIs(t, s.Revoke(context.Background(), "key_nobody", epoch), apikey.ErrCredentialNotFound)
}

func testRevokeZero(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	check.NoError(t, s.Put(ctx, a))
	check.ErrorIs(t, s.Revoke(ctx, a.ID, time.Time{}), apikey.ErrZeroRevocation)
	_, err := s.RevokeAll(ctx, "lic_a", apikey.Sandbox, time.Time{})
	check.ErrorIs(t, err, apikey.ErrZeroRevocation)
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err)
	check.Instant(t, time.Time{}, got.RevokedAt, "RevokedAt after refused revocations")
}

func testRevokeAll(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	creds := []apikey.Credential{
		Credential(1, "lic_a", apikey.Sandbox),
		Credential(2, "lic_a", apikey.Sandbox),
		Credential(3, "lic_a", apikey.Live),
		Credential(4, "lic_b", apikey.Sandbox),
		Credential(5, "lic_a", apikey.Sandbox),
	}
	early := epoch.Add(time.Minute)
	for _, c := range creds {
		check.NoError(t, s.Put(ctx, c))
	}
	check.NoError(t, s.Revoke(ctx, creds[4].ID, early)) // already revoked earlier: unchanged
	at := epoch.Add(time.Hour)
	n, err := s.RevokeAll(ctx, "lic_a", apikey.Sandbox, at)
	check.NoError(t, err)
	check.Equal(t, 2, n, "only lic_a's sandbox keys that changed")
	want := []time.Time{at, at, {}, {}, early}
	for i, c := range creds {
		got, err := s.Get(ctx, c.Hash)
		check.NoError(t, err)
		requireTime(t, fmt.Sprintf("creds[%d].RevokedAt", i), want[i], got.RevokedAt)
	}
	n, err = s.RevokeAll(ctx, "lic_nobody", apikey.Sandbox, at)
	check.NoError(t, err)
	check.Equal(t, 0, n)
}

func testConcurrentPut(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	const n = 8
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c := Credential(100+i, "lic_a", apikey.Sandbox)
			c.ID = "key_contended"
			err := s.Put(ctx, c)
			if err == nil {
				wins.Add(1)
				return
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	check.Equal(t, int32(1), wins.Load(), "exactly one Put of a contended ID succeeds")
	for err := range errs {
		check.ErrorIs(t, err, apikey.ErrDuplicateCredential)
	}
}

func testConcurrentRevoke(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	check.NoError(t, s.Put(ctx, a))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			// Not check.NoError: t.FailNow may only be called from the test's goroutine.
			if err := s.Revoke(ctx, a.ID, epoch.Add(time.Duration(8-i)*time.Minute)); err != nil {
				t.Errorf("Revoke %d: got error %q, want none", i, err)
			}
		})
	}
	wg.Wait()
	got, err := s.Get(ctx, a.Hash)
	check.NoError(t, err)
	requireTime(t, "RevokedAt", epoch.Add(time.Minute), got.RevokedAt) // the earliest, whatever the order
}

func testCanceled(t *testing.T, s apikey.CredentialStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := Credential(1, "lic_a", apikey.Sandbox)
	check.Error(t, s.Put(ctx, c))
	_, err := s.Get(ctx, c.Hash)
	check.Error(t, err)
	check.NotErrorIs(t, err, apikey.ErrCredentialNotFound, "a failed lookup must not read as an unknown key")
}

func testPermissions(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	full := Credential(1, "lic_a", apikey.Live)
	restricted := Credential(2, "lic_a", apikey.Live)
	restricted.Permissions = []string{"events:read", "orders:write"}
	check.NoError(t, s.Put(ctx, full))
	check.NoError(t, s.Put(ctx, restricted))
	for _, c := range []apikey.Credential{full, restricted} {
		got, err := s.Get(ctx, c.Hash)
		check.NoError(t, err)
		RequireSame(t, c, got)
	}
	// What a caller does with a returned credential does not reach the store.
	got, err := s.Get(ctx, restricted.Hash)
	check.NoError(t, err)
	got.Permissions[0] = "orders:read"
	again, err := s.Get(ctx, restricted.Hash)
	check.NoError(t, err)
	RequireSame(t, restricted, again)
}

func testLookup(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Sandbox)
	a.Permissions = []string{"orders:read"}
	check.NoError(t, s.Put(ctx, a))
	got, err := s.Lookup(ctx, a.ID)
	check.NoError(t, err)
	RequireSame(t, a, got)
	_, err = s.Lookup(ctx, "key_nobody")
	check.ErrorIs(t, err, apikey.ErrCredentialNotFound)
}

func testList(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	at := epoch.Add(time.Hour)
	creds := []apikey.Credential{
		Credential(1, "lic_a", apikey.Live),    // listed
		Credential(2, "lic_a", apikey.Live),    // revoked before at: not listed
		Credential(3, "lic_a", apikey.Live),    // revocation scheduled after at: listed
		Credential(4, "lic_a", apikey.Live),    // expired at at exactly: not listed
		Credential(5, "lic_a", apikey.Sandbox), // another environment
		Credential(6, "lic_b", apikey.Live),    // another licensee
		Credential(7, "lic_a", apikey.Live),    // never expires: listed
	}
	creds[3].ExpiresAt = at
	creds[6].ExpiresAt = time.Time{}
	for i := range creds {
		creds[i].CreatedAt = epoch.Add(time.Duration(i) * time.Second)
		check.NoError(t, s.Put(ctx, creds[i]))
	}
	check.NoError(t, s.Revoke(ctx, creds[1].ID, at.Add(-time.Second)))
	check.NoError(t, s.Revoke(ctx, creds[2].ID, at.Add(time.Second)))
	creds[2].RevokedAt = at.Add(time.Second)
	got, err := s.List(ctx, "lic_a", apikey.Live, at)
	check.NoError(t, err)
	check.Len(t, got, 3, "lic_a's live keys that still work at the instant")
	for i, want := range []apikey.Credential{creds[0], creds[2], creds[6]} {
		RequireSame(t, want, got[i]) // oldest first
	}
	got, err = s.List(ctx, "lic_nobody", apikey.Live, at)
	check.NoError(t, err)
	check.Len(t, got, 0)
}

func testRoll(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	old := Credential(1, "lic_a", apikey.Live)
	old.Permissions = []string{"orders:read"}
	check.NoError(t, s.Put(ctx, old))
	next := Credential(2, "lic_a", apikey.Live)
	next.Permissions = []string{"orders:read"}
	next.CreatedAt = epoch.Add(time.Minute)
	end := next.CreatedAt.Add(24 * time.Hour)
	check.NoError(t, s.Roll(ctx, old.ID, next, end))
	got, err := s.Get(ctx, next.Hash)
	check.NoError(t, err)
	RequireSame(t, next, got)
	got, err = s.Get(ctx, old.Hash)
	check.NoError(t, err)
	old.RevokedAt = end
	RequireSame(t, old, got)
	// A key is rolled once: rolling it again, sooner or later, is refused and changes nothing.
	for _, at := range []time.Time{next.CreatedAt.Add(time.Hour), end.Add(time.Hour)} {
		again := Credential(3, "lic_a", apikey.Live)
		again.CreatedAt = next.CreatedAt.Add(time.Minute)
		check.ErrorIs(t, s.Roll(ctx, old.ID, again, at), apikey.ErrCredentialEnded)
		_, err = s.Get(ctx, again.Hash)
		check.ErrorIs(t, err, apikey.ErrCredentialNotFound, "a refused roll must store nothing")
	}
	got, err = s.Get(ctx, old.Hash)
	check.NoError(t, err)
	RequireSame(t, old, got)
	// So is a key revoked for later.
	other := Credential(4, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, other))
	check.NoError(t, s.Revoke(ctx, other.ID, end))
	check.ErrorIs(t, s.Roll(ctx, other.ID, Credential(5, "lic_a", apikey.Live), end), apikey.ErrCredentialEnded)
}

func testRollRefused(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	old := Credential(1, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, old))
	next := Credential(2, "lic_a", apikey.Live)
	check.ErrorIs(t, s.Roll(ctx, "key_nobody", next, epoch.Add(time.Hour)), apikey.ErrCredentialNotFound)
	check.ErrorIs(t, s.Roll(ctx, old.ID, next, time.Time{}), apikey.ErrZeroRevocation)
	bad := next
	bad.Licensee = ""
	check.ErrorIs(t, s.Roll(ctx, old.ID, bad, epoch.Add(time.Hour)), apikey.ErrInvalidCredential)
	dup := next
	dup.Hash = old.Hash
	check.ErrorIs(t, s.Roll(ctx, old.ID, dup, epoch.Add(time.Hour)), apikey.ErrDuplicateCredential)
	// Nothing of a refused roll happened: the old key is not revoked, the new one not stored.
	got, err := s.Get(ctx, old.Hash)
	check.NoError(t, err)
	RequireSame(t, old, got)
	_, err = s.Get(ctx, next.Hash)
	check.ErrorIs(t, err, apikey.ErrCredentialNotFound, "a refused roll must store nothing")
	// A key that has ended cannot be rolled.
	check.NoError(t, s.Revoke(ctx, old.ID, epoch.Add(time.Minute)))
	next.CreatedAt = epoch.Add(time.Minute)
	check.ErrorIs(t, s.Roll(ctx, old.ID, next, next.CreatedAt.Add(time.Hour)), apikey.ErrCredentialEnded)
	_, err = s.Get(ctx, next.Hash)
	check.ErrorIs(t, err, apikey.ErrCredentialNotFound, "a refused roll must store nothing")
}

func testConcurrentRoll(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	old := Credential(1, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, old))
	const n = 8
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			next := Credential(10+i, "lic_a", apikey.Live)
			next.CreatedAt = epoch.Add(time.Second)
			err := s.Roll(ctx, old.ID, next, epoch.Add(time.Duration(n-i)*time.Hour))
			if err == nil {
				wins.Add(1)
				return
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	check.Equal(t, int32(1), wins.Load(), "of concurrent rolls of one key, exactly one replaces it")
	for err := range errs {
		check.ErrorIs(t, err, apikey.ErrCredentialEnded)
	}
	list, err := s.List(ctx, "lic_a", apikey.Live, epoch.Add(time.Minute))
	check.NoError(t, err)
	check.Len(t, list, 2, "the old key, until it ends, and its one replacement")
}

func testMarkUsed(t *testing.T, s apikey.CredentialStore) {
	ctx := context.Background()
	a := Credential(1, "lic_a", apikey.Live)
	b := Credential(2, "lic_a", apikey.Live)
	check.NoError(t, s.Put(ctx, a))
	check.NoError(t, s.Put(ctx, b))
	t1 := epoch.Add(time.Hour)
	check.NoError(t, s.MarkUsed(ctx, map[string]time.Time{a.ID: t1, "key_nobody": t1}))
	check.NoError(t, s.MarkUsed(ctx, map[string]time.Time{a.ID: t1.Add(-time.Minute), b.ID: t1.Add(time.Minute)}))
	check.NoError(t, s.MarkUsed(ctx, nil))
	a.LastUsedAt, b.LastUsedAt = t1, t1.Add(time.Minute) // the later of the two instants
	for _, c := range []apikey.Credential{a, b} {
		got, err := s.Get(ctx, c.Hash)
		check.NoError(t, err)
		RequireSame(t, c, got)
		got, err = s.Lookup(ctx, c.ID)
		check.NoError(t, err)
		RequireSame(t, c, got)
	}
}
