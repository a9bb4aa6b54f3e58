package portaltest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/portal"
)

// Run runs the suite. newStore is called once per subtest; it may return a fresh store or the same
// one every time, since each subtest uses keys of its own.
func Run(t *testing.T, newStore func(t *testing.T) portal.Store) {
	t.Helper()
	// A nonce per Run keeps the keys of this run apart from those of an earlier one that left
	// entries behind in a store that outlives tests.
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	tests := []struct {
		name string
		fn   func(t *testing.T, s portal.Store, e env)
	}{
		{"PutGet", testPutGet},
		{"PutTake", testPutTake},
		{"Permissions", testPermissions},
		{"PermissionsAreCopied", testPermissionsCopied},
		{"PutReplaces", testPutReplaces},
		{"PutExpiredReplaces", testPutExpiredReplaces},
		{"Absent", testAbsent},
		{"ExpiryGet", testExpiryGet},
		{"ExpiryTake", testExpiryTake},
		{"ExpiredOnArrival", testExpiredOnArrival},
		{"TakeRemoves", testTakeRemoves},
		{"Delete", testDelete},
		{"KeysAreIndependent", testKeysIndependent},
		{"ConcurrentTake", testConcurrentTake},
		{"ConcurrentKeys", testConcurrentKeys},
		{"CanceledContext", testCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The test's context, bounded by go test's -timeout: the subtests assert values, not speed.
			e := env{ctx: t.Context(), now: time.Now().UTC().Truncate(time.Microsecond), nonce: hex.EncodeToString(nonce[:]),
				name: t.Name()}
			tc.fn(t, newStore(t), e)
		})
	}
}

// env is one subtest's context, clock reading and key space.
type env struct {
	ctx   context.Context
	now   time.Time // the real clock at the start of the subtest, to the microsecond
	nonce string
	name  string
}

// key returns the subtest's key for label, shaped as a Portal's: a SHA-256 in lowercase hex.
func (e env) key(label string) string {
	sum := sha256.Sum256([]byte(e.nonce + "\x00" + e.name + "\x00" + label))
	return hex.EncodeToString(sum[:])
}

// session returns a distinct session for n, every field set, live for an hour after e.now.
func (e env) session(n int) portal.Session {
	return portal.Session{
		Licensee:    fmt.Sprintf("lic_%04d", n),
		Environment: []apikey.Environment{apikey.Sandbox, apikey.Live}[n%2],
		KeyID:       fmt.Sprintf("key_%026d", n),
		Permissions: []string{"webhook_endpoints:write", "events:read", fmt.Sprintf("orders:read%d", n)},
		Version:     fmt.Sprintf("v%d", n%3+1),
		ExpiresAt:   e.now.Add(time.Hour + time.Duration(n)*time.Second),
	}
}

// same fails unless got is want: every field, the expiry as an instant, and Permissions nil exactly
// when want's are.
func same(t testing.TB, want, got portal.Session, msgAndArgs ...any) {
	t.Helper()
	what := describe(msgAndArgs)
	check.Instant(t, want.ExpiresAt, got.ExpiresAt, "%sExpiresAt", what)
	switch {
	case want.Permissions == nil && got.Permissions != nil:
		t.Fatalf("%sPermissions: got %q, want nil (the full key's): a full key came back restricted", what, got.Permissions)
	case want.Permissions != nil && got.Permissions == nil:
		t.Fatalf("%sPermissions: got nil, which means every permission, want %q: a store that loses a restriction "+
			"(an empty list included) escalates the session to the full key", what, want.Permissions)
	}
	got.ExpiresAt = want.ExpiresAt // the same instant; the location may differ
	check.Equal(t, want, got, "%ssession", what)
}

// describe formats the optional context of same.
func describe(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprint(msgAndArgs[0]) + ": "
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...) + ": "
	}
	return fmt.Sprint(msgAndArgs...) + ": "
}

// get fails unless key holds want at now.
func get(t testing.TB, s portal.Store, e env, key string, now time.Time, want portal.Session, msgAndArgs ...any) {
	t.Helper()
	got, err := s.Get(e.ctx, key, now)
	check.NoError(t, err, msgAndArgs...)
	same(t, want, got, msgAndArgs...)
}

// absent fails unless Get of key at now is ErrNotFound.
func absent(t testing.TB, s portal.Store, e env, key string, now time.Time, msgAndArgs ...any) {
	t.Helper()
	_, err := s.Get(e.ctx, key, now)
	check.ErrorIs(t, err, portal.ErrNotFound, msgAndArgs...)
}

func testPutGet(t *testing.T, s portal.Store, e env) {
	a, b := e.session(1), e.session(2) // live and sandbox
	bare := portal.Session{Licensee: "lic_bare", Environment: apikey.Live, ExpiresAt: e.now.Add(2 * time.Hour)}
	for i, sess := range []portal.Session{a, b, bare} {
		check.NoError(t, s.Put(e.ctx, e.key(fmt.Sprint(i)), sess, e.now))
	}
	for i, want := range []portal.Session{a, b, bare} {
		// Twice: Get does not consume.
		get(t, s, e, e.key(fmt.Sprint(i)), e.now, want, "Get %d", i)
		get(t, s, e, e.key(fmt.Sprint(i)), e.now.Add(time.Minute), want, "Get %d again", i)
	}
}

func testPutTake(t *testing.T, s portal.Store, e env) {
	a, b := e.session(1), e.session(2)
	check.NoError(t, s.Put(e.ctx, e.key("a"), a, e.now))
	check.NoError(t, s.Put(e.ctx, e.key("b"), b, e.now))
	for label, want := range map[string]portal.Session{"a": a, "b": b} {
		got, err := s.Take(e.ctx, e.key(label), e.now)
		check.NoError(t, err, "Take %s", label)
		same(t, want, got, "Take %s", label)
	}
}

// The Portal reads nil Permissions as the full key's; an empty list is a key that may do nothing.
func testPermissions(t *testing.T, s portal.Store, e env) {
	cases := []struct {
		name  string
		perms []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"one", []string{"webhook_endpoints:read"}},
		{"some", []string{"webhook_endpoints:write", "events:read", "orders:read"}},
		// What a hand-made encoding (comma-separated, a Postgres array literal, JSON built by hand)
		// would split, quote or lose; and an order that must be kept.
		{"odd", []string{"b:read", "a,b:write", `"quoted"`, `{brace}`, `back\slash`, "NULL", "", "ünï:read", "a b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sess := e.session(7)
			sess.Permissions = tc.perms
			k := e.key("perms-" + tc.name)
			check.NoError(t, s.Put(e.ctx, k, sess, e.now))
			get(t, s, e, k, e.now, sess, "Get")
			got, err := s.Take(e.ctx, k, e.now)
			check.NoError(t, err, "Take")
			same(t, sess, got, "Take")
		})
	}
}

// A store keeps its own copy: what the caller does with the slice it passed, or was given, reaches
// no stored session.
func testPermissionsCopied(t *testing.T, s portal.Store, e env) {
	sess := e.session(1)
	perms := []string{"webhook_endpoints:read", "events:read"}
	sess.Permissions = perms
	k := e.key("k")
	check.NoError(t, s.Put(e.ctx, k, sess, e.now))
	perms[0] = "webhook_endpoints:write"
	want := sess
	want.Permissions = []string{"webhook_endpoints:read", "events:read"}
	got, err := s.Get(e.ctx, k, e.now)
	check.NoError(t, err)
	same(t, want, got, "after the caller changed the slice it passed")
	got.Permissions[1] = "orders:write"
	get(t, s, e, k, e.now, want, "after the caller changed the slice it was given")
}

func testPutReplaces(t *testing.T, s portal.Store, e env) {
	k := e.key("k")
	restricted := e.session(1)
	check.NoError(t, s.Put(e.ctx, k, restricted, e.now))

	// Every field is replaced: a full key's session over a restricted one, and back.
	full := e.session(2)
	full.Permissions = nil
	check.NoError(t, s.Put(e.ctx, k, full, e.now))
	get(t, s, e, k, e.now, full, "a full session replaced a restricted one")
	none := e.session(3)
	none.Permissions = []string{}
	check.NoError(t, s.Put(e.ctx, k, none, e.now))
	get(t, s, e, k, e.now, none, "a session without permissions replaced a full one")

	// So is the expiry, to an earlier one: a store that keeps the first TTL would serve it longer.
	long, short := e.session(4), e.session(5)
	long.ExpiresAt, short.ExpiresAt = e.now.Add(24*time.Hour), e.now.Add(time.Hour)
	check.NoError(t, s.Put(e.ctx, k, long, e.now))
	check.NoError(t, s.Put(e.ctx, k, short, e.now.Add(time.Minute)))
	get(t, s, e, k, e.now.Add(time.Minute), short)
	absent(t, s, e, k, short.ExpiresAt, "the replacement's expiry holds, not the replaced one's")
	absent(t, s, e, k, e.now.Add(2*time.Hour), "the replacement's expiry holds, not the replaced one's")

	// And a key that was taken can hold a new session.
	check.NoError(t, s.Put(e.ctx, k, restricted, e.now))
	_, err := s.Take(e.ctx, k, e.now)
	check.NoError(t, err)
	check.NoError(t, s.Put(e.ctx, k, full, e.now))
	get(t, s, e, k, e.now, full, "Put after Take")
}

// A session Put already expired replaces what the key held: the old one is not found either.
func testPutExpiredReplaces(t *testing.T, s portal.Store, e env) {
	for i, expires := range []time.Time{e.now, e.now.Add(-time.Hour), {}} {
		k := e.key(fmt.Sprint(i))
		check.NoError(t, s.Put(e.ctx, k, e.session(1), e.now))
		gone := e.session(2)
		gone.ExpiresAt = expires
		check.NoError(t, s.Put(e.ctx, k, gone, e.now), "Put of a session expired at %v", expires)
		absent(t, s, e, k, e.now, "Get after an expired session (%v) replaced a live one", expires)
		_, err := s.Take(e.ctx, k, e.now)
		check.ErrorIs(t, err, portal.ErrNotFound, "Take after an expired session (%v) replaced a live one", expires)
	}
}

func testAbsent(t *testing.T, s portal.Store, e env) {
	k := e.key("nobody")
	absent(t, s, e, k, e.now, "Get of a key never written")
	_, err := s.Take(e.ctx, k, e.now)
	check.ErrorIs(t, err, portal.ErrNotFound, "Take of a key never written")
	check.NoError(t, s.Delete(e.ctx, k), "Delete of a key never written")
	check.NoError(t, s.Delete(e.ctx, k), "Delete of a key never written, again")
	absent(t, s, e, k, e.now, "Get after Delete of a key never written")
}

func testExpiryGet(t *testing.T, s portal.Store, e env) {
	sess := e.session(1)
	k := e.key("k")
	check.NoError(t, s.Put(e.ctx, k, sess, e.now))
	get(t, s, e, k, sess.ExpiresAt.Add(-time.Microsecond), sess, "a microsecond before ExpiresAt")
	absent(t, s, e, k, sess.ExpiresAt, "at ExpiresAt")
	absent(t, s, e, k, sess.ExpiresAt.Add(time.Microsecond), "a microsecond after ExpiresAt")
	absent(t, s, e, k, sess.ExpiresAt.Add(24*time.Hour), "a day after ExpiresAt")
}

func testExpiryTake(t *testing.T, s portal.Store, e env) {
	sess := e.session(1)
	for _, at := range []time.Time{sess.ExpiresAt, sess.ExpiresAt.Add(time.Microsecond), sess.ExpiresAt.Add(24 * time.Hour)} {
		k := e.key(at.String())
		check.NoError(t, s.Put(e.ctx, k, sess, e.now))
		_, err := s.Take(e.ctx, k, at)
		check.ErrorIs(t, err, portal.ErrNotFound, "Take %v after ExpiresAt", at.Sub(sess.ExpiresAt))
	}
	k := e.key("live")
	check.NoError(t, s.Put(e.ctx, k, sess, e.now))
	got, err := s.Take(e.ctx, k, sess.ExpiresAt.Add(-time.Microsecond))
	check.NoError(t, err, "Take a microsecond before ExpiresAt")
	same(t, sess, got, "Take a microsecond before ExpiresAt")
}

func testExpiredOnArrival(t *testing.T, s portal.Store, e env) {
	for _, tc := range []struct {
		name    string
		expires time.Time
	}{
		{"at now", e.now},
		{"a microsecond before now", e.now.Add(-time.Microsecond)},
		{"a day before now", e.now.Add(-24 * time.Hour)},
		{"the zero time", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := e.session(1)
			sess.ExpiresAt = tc.expires
			k := e.key(tc.name)
			check.NoError(t, s.Put(e.ctx, k, sess, e.now), "Put of an expired session is not an error")
			absent(t, s, e, k, e.now)
			_, err := s.Take(e.ctx, k, e.now)
			check.ErrorIs(t, err, portal.ErrNotFound)
		})
	}
}

func testTakeRemoves(t *testing.T, s portal.Store, e env) {
	sess := e.session(1)
	k := e.key("k")
	check.NoError(t, s.Put(e.ctx, k, sess, e.now))
	got, err := s.Take(e.ctx, k, e.now)
	check.NoError(t, err)
	same(t, sess, got)
	absent(t, s, e, k, e.now, "Get after Take")
	_, err = s.Take(e.ctx, k, e.now)
	check.ErrorIs(t, err, portal.ErrNotFound, "a second Take")
}

func testDelete(t *testing.T, s portal.Store, e env) {
	a, b := e.session(1), e.session(2)
	check.NoError(t, s.Put(e.ctx, e.key("a"), a, e.now))
	check.NoError(t, s.Put(e.ctx, e.key("b"), b, e.now))
	check.NoError(t, s.Delete(e.ctx, e.key("a")))
	absent(t, s, e, e.key("a"), e.now, "Get after Delete")
	_, err := s.Take(e.ctx, e.key("a"), e.now)
	check.ErrorIs(t, err, portal.ErrNotFound, "Take after Delete")
	check.NoError(t, s.Delete(e.ctx, e.key("a")), "Delete again")
	get(t, s, e, e.key("b"), e.now, b, "another key after Delete")
}

// Keys a careless scheme would confuse: one digit apart, at either end.
func testKeysIndependent(t *testing.T, s portal.Store, e env) {
	base := e.key("base")
	flip := func(c byte) byte {
		if c == '0' {
			return '1'
		}
		return '0'
	}
	first := string(flip(base[0])) + base[1:]
	last := base[:63] + string(flip(base[63]))
	keys := []string{base, first, last, e.key("other")}
	sessions := make([]portal.Session, len(keys))
	for i, k := range keys {
		sessions[i] = e.session(i)
		check.NoError(t, s.Put(e.ctx, k, sessions[i], e.now))
	}
	for i, k := range keys {
		get(t, s, e, k, e.now, sessions[i], "key %d", i)
	}
	got, err := s.Take(e.ctx, base, e.now)
	check.NoError(t, err)
	same(t, sessions[0], got, "Take of the base key")
	check.NoError(t, s.Delete(e.ctx, first))
	absent(t, s, e, first, e.now)
	get(t, s, e, last, e.now, sessions[2], "a key one digit from those taken and deleted")
	get(t, s, e, keys[3], e.now, sessions[3], "an unrelated key")
}

// Of many Takes of one key at once, exactly one gets the session: a link opens one session.
func testConcurrentTake(t *testing.T, s portal.Store, e env) {
	const rounds, takers = 10, 16
	for round := range rounds {
		k := e.key(fmt.Sprint("race-", round))
		sess := e.session(round)
		check.NoError(t, s.Put(e.ctx, k, sess, e.now))
		var (
			wins  atomic.Int32
			won   portal.Session
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make(chan error, takers)
		)
		for range takers {
			wg.Go(func() {
				<-start
				got, err := s.Take(e.ctx, k, e.now)
				switch {
				case err == nil:
					if wins.Add(1) == 1 {
						won = got
					}
				case !errors.Is(err, portal.ErrNotFound):
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			check.NoError(t, err, "round %d: a Take that lost must get ErrNotFound", round)
		}
		check.Equal(t, int32(1), wins.Load(), "round %d: Takes that got the session", round)
		same(t, sess, won, "round %d: the winner's session", round)
		absent(t, s, e, k, e.now, "round %d: after the race", round)
	}
}

// Many goroutines, each on keys of its own: every Put, Get and Take sees its own key's session.
func testConcurrentKeys(t *testing.T, s portal.Store, e env) {
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				k := e.key(fmt.Sprint("worker-", n))
				sess := e.session(n)
				if err := s.Put(e.ctx, k, sess, e.now); err != nil {
					t.Errorf("Put %d: %v", n, err)
					return
				}
				for _, op := range []string{"Get", "Take"} {
					f := s.Get
					if op == "Take" {
						f = s.Take
					}
					got, err := f(e.ctx, k, e.now)
					if err != nil {
						t.Errorf("%s %d: %v", op, n, err)
						return
					}
					if got.Licensee != sess.Licensee || got.KeyID != sess.KeyID || !got.ExpiresAt.Equal(sess.ExpiresAt) {
						t.Errorf("%s %d: got %+v, want %+v", op, n, got, sess)
						return
					}
				}
				if _, err := s.Get(e.ctx, k, e.now); !errors.Is(err, portal.ErrNotFound) {
					t.Errorf("Get %d after Take: got %v, want ErrNotFound", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// promptly bounds a call with a done context: a store must return, not wait for a server.
const promptly = 10 * time.Second

// within runs f and fails if it has not returned after promptly; it returns f's error.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(promptly)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatalf("%s with a done context has not returned after %v", what, promptly)
		return nil
	}
}

func testCanceled(t *testing.T, s portal.Store, e env) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), e.now.Add(-time.Second))
	defer cancel()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "past its deadline": expired} {
		t.Run(name, func(t *testing.T) {
			held, sess := e.key(name+" held"), e.session(1)
			check.NoError(t, s.Put(e.ctx, held, sess, e.now))
			fresh := e.key(name + " fresh")

			check.Error(t, within(t, "Put", func() error { return s.Put(ctx, fresh, e.session(2), e.now) }), "Put")
			for _, op := range []string{"Get", "Take"} {
				f := s.Get
				if op == "Take" {
					f = s.Take
				}
				err := within(t, op, func() error { _, err := f(ctx, held, e.now); return err })
				check.Error(t, err, op)
				check.NotErrorIs(t, err, portal.ErrNotFound, "%s: a store that failed must not read as an unknown link", op)
			}
			check.Error(t, within(t, "Delete", func() error { return s.Delete(ctx, held) }), "Delete")

			// Nothing happened: no new entry, and the held one was neither taken nor deleted.
			absent(t, s, e, fresh, e.now, "a Put with a done context stored its session")
			get(t, s, e, held, e.now, sess, "after a Take and a Delete with a done context")
		})
	}
}
