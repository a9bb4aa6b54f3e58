package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

func TestScopedKey(t *testing.T) {
	sb := Principal{Licensee: "lic_a", Environment: Sandbox}
	live := Principal{Licensee: "lic_a", Environment: Live}
	tests := []struct {
		name string
		p    Principal
		in   []string
		want string
	}{
		{"sandbox", sb, []string{"orders", "ord_1"}, "sandbox/lic_a/orders/ord_1"},
		{"live", live, []string{"orders", "ord_1"}, "live/lic_a/orders/ord_1"},
		{"no parts", sb, nil, "sandbox/lic_a/"},
		{"slash in a part is escaped", sb, []string{"a/b"}, "sandbox/lic_a/a%2Fb"},
		{"slash in the licensee is escaped", Principal{Licensee: "x/live/lic_a", Environment: Sandbox}, []string{"k"}, "sandbox/x%2Flive%2Flic_a/k"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ScopedKey(tc.p, tc.in...))
			require.True(t, strings.HasPrefix(ScopedKey(tc.p, tc.in...), ScopePrefix(tc.p)))
		})
	}
	// One-to-one: splitting differently never collides.
	require.NotEqual(t, ScopedKey(sb, "a/b"), ScopedKey(sb, "a", "b"))
	require.NotEqual(t, ScopedKey(Principal{Licensee: "lic_a/x", Environment: Sandbox}), ScopedKey(sb, "x"))
	require.False(t, strings.HasPrefix(ScopedKey(Principal{Licensee: "lic_ab", Environment: Sandbox}, "k"), ScopePrefix(sb)),
		"lic_a's prefix must not cover lic_ab")

	for _, p := range []Principal{{}, {Licensee: "lic_a"}, {Environment: Sandbox}, {Licensee: "lic_a", Environment: "test"}} {
		require.Panics(t, func() { ScopedKey(p, "k") }, "%+v", p)
	}
	_, err := ScopedKeyFromContext(context.Background(), "k")
	require.ErrorIs(t, err, ErrNoPrincipal)
	k, err := ScopedKeyFromContext(NewContext(context.Background(), live), "k")
	require.NoError(t, err)
	require.Equal(t, "live/lic_a/k", k)
}

func TestPrincipalScope(t *testing.T) {
	require.Equal(t, "sandbox:lic_a", Principal{Licensee: "lic_a", Environment: Sandbox}.Scope())
	require.Equal(t, "live:lic_a", Principal{Licensee: "lic_a", Environment: Live}.Scope())
	require.Equal(t, "", Principal{}.Scope())
	require.Equal(t, "", Principal{Licensee: "lic_a"}.Scope())

	_, ok := FromContext(context.Background())
	require.False(t, ok)
	_, ok = FromContext(NewContext(context.Background(), Principal{Licensee: "lic_a"}))
	require.False(t, ok, "an invalid principal is no principal")
	_, err := ScopeFromContext(context.Background())
	require.ErrorIs(t, err, ErrNoPrincipal)
	s, err := ScopeFromContext(NewContext(context.Background(), Principal{Licensee: "lic_a", Environment: Live}))
	require.NoError(t, err)
	require.Equal(t, "live:lic_a", s)
}

// Data written with one credential is visible with that licensee's keys of the same environment
// only: never with the other environment's key, never to another licensee.
func TestScopedIsolation(t *testing.T) {
	principals := []Principal{
		{Licensee: "lic_a", Environment: Sandbox},
		{Licensee: "lic_a", Environment: Live},
		{Licensee: "lic_b", Environment: Sandbox},
		{Licensee: "lic_b", Environment: Live},
	}
	kv := &MemoryKV[string]{}
	s := must(NewScoped[string](kv))
	ctxOf := func(p Principal) context.Context { return NewContext(context.Background(), p) }
	for _, p := range principals {
		require.NoError(t, s.Put(ctxOf(p), "ord_1", "order of "+p.Scope()))
	}
	require.Equal(t, len(principals), kv.Len(), "same key, four scopes, four records")
	for _, reader := range principals {
		for _, writer := range principals {
			t.Run(reader.Scope()+" reads "+writer.Scope(), func(t *testing.T) {
				v, err := s.Get(ctxOf(reader), "ord_1")
				require.NoError(t, err)
				require.Equal(t, "order of "+reader.Scope(), v, "a reader sees only its own scope's record")
			})
		}
	}
	// A record only one scope has is invisible to the others.
	require.NoError(t, s.Put(ctxOf(principals[0]), "ord_sandbox_only", "x"))
	for _, p := range principals[1:] {
		_, err := s.Get(ctxOf(p), "ord_sandbox_only")
		require.ErrorIs(t, err, ErrNotFound, p.Scope())
	}
	require.NoError(t, s.Delete(ctxOf(principals[1]), "ord_sandbox_only"), "deleting in another scope is a no-op")
	_, err := s.Get(ctxOf(principals[0]), "ord_sandbox_only")
	require.NoError(t, err)

	// Without a principal nothing is read or written.
	_, err = s.Get(context.Background(), "ord_1")
	require.ErrorIs(t, err, ErrNoPrincipal)
	require.ErrorIs(t, s.Put(context.Background(), "ord_1", "x"), ErrNoPrincipal)
	require.ErrorIs(t, s.Delete(context.Background(), "ord_1"), ErrNoPrincipal)
	_, err = s.Reset(context.Background())
	require.ErrorIs(t, err, ErrNoPrincipal)
}

func TestScopedReset(t *testing.T) {
	kv := &MemoryKV[int]{}
	s := must(NewScoped[int](kv))
	sbA := NewContext(context.Background(), Principal{Licensee: "lic_a", Environment: Sandbox})
	liveA := NewContext(context.Background(), Principal{Licensee: "lic_a", Environment: Live})
	sbAB := NewContext(context.Background(), Principal{Licensee: "lic_ab", Environment: Sandbox})
	for i := range 3 {
		require.NoError(t, s.Put(sbA, fmt.Sprint(i), i))
		require.NoError(t, s.Put(liveA, fmt.Sprint(i), i))
		require.NoError(t, s.Put(sbAB, fmt.Sprint(i), i))
	}
	_, err := s.Reset(liveA)
	require.ErrorIs(t, err, ErrNotSandbox, "production data is never reset")
	n, err := s.Reset(sbA)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = s.Get(sbA, "0")
	require.ErrorIs(t, err, ErrNotFound)
	v, err := s.Get(liveA, "2")
	require.NoError(t, err)
	require.Equal(t, 2, v)
	_, err = s.Get(sbAB, "0")
	require.NoError(t, err, "lic_ab shares lic_a's spelling but not its scope")
	require.Equal(t, 6, kv.Len())
}

// Through HTTP: an order created with a sandbox key is a 404 with the same licensee's production key.
func TestIsolationOverHTTP(t *testing.T) {
	iss := must(NewIssuer(nil, nil))
	orders := must(NewScoped[string](&MemoryKV[string]{}))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := orders.Put(r.Context(), r.PathValue("id"), "created"); err != nil {
			apierror.Write(w, r, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, err := orders.Get(r.Context(), r.PathValue("id"))
		if errors.Is(err, ErrNotFound) {
			apierror.Write(w, r, apierror.NotFound("order_not_found", "no order has this ID",
				apierror.Path("id", "order_not_found", "no order has this ID")))
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	})
	h := must(NewAuthenticator(iss, nil)).Handler(mux)
	sandboxKey := issue(t, iss, "lic_a", Sandbox).APIKey
	liveKey := issue(t, iss, "lic_a", Live).APIKey

	require.Equal(t, http.StatusCreated, do(t, h, http.MethodPost, "/v1/orders/ord_1", sandboxKey, "").Code)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/v1/orders/ord_1", sandboxKey, "").Code)
	rec := do(t, h, http.MethodGet, "/v1/orders/ord_1", liveKey, "")
	require.Equal(t, http.StatusNotFound, rec.Code, "sandbox data is invisible to a production key")
	requireConforms(t, rec)

	require.Equal(t, http.StatusCreated, do(t, h, http.MethodPost, "/v1/orders/ord_2", liveKey, "").Code)
	require.Equal(t, http.StatusNotFound, do(t, h, http.MethodGet, "/v1/orders/ord_2", sandboxKey, "").Code,
		"production data is invisible to a sandbox key")
}

func TestRequestHelpers(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	_, err := RequestScope(r)
	require.ErrorIs(t, err, ErrNoPrincipal)
	require.False(t, InSandbox(r))

	sb := r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: Sandbox}))
	s, err := RequestScope(sb)
	require.NoError(t, err)
	require.Equal(t, "sandbox:lic_a", s)
	require.True(t, InSandbox(sb))

	live := r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: Live}))
	s, err = RequestScope(live)
	require.NoError(t, err)
	require.Equal(t, "live:lic_a", s)
	require.False(t, InSandbox(live))
}

// Every licensee the Issuer accepts must get a version pin through the wiring the package documents
// (versioning.Options.Licensee returning the principal's Scope): the scope is the licensee plus up
// to 8 bytes of environment, and a PinStore bound tighter than that answered a 500 to every request
// of a licensee with a long identifier.
func TestScopeFitsVersionPins(t *testing.T) {
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}}, nil)
	require.NoError(t, err)
	pins := versioning.NewMemoryPinStore()
	router := must(versioning.New(reg, &versioning.Options{Pins: pins,
		Licensee: func(r *http.Request) (string, bool) {
			scope, err := RequestScope(r)
			return scope, err == nil
		}}))
	iss := must(NewIssuer(nil, nil))
	h := must(NewAuthenticator(iss, nil)).Handler(router.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	longest := strings.Repeat("l", MaxLicenseeLen)
	for _, env := range []Environment{Sandbox, Live} {
		t.Run(string(env), func(t *testing.T) {
			key := issue(t, iss, longest, env).APIKey
			rec := do(t, h, http.MethodGet, "/v1/orders", key, "")
			require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
			p, err := pins.Get(context.Background(), Principal{Licensee: longest, Environment: env}.Scope())
			require.NoError(t, err)
			require.Equal(t, "v1", p.Version)
		})
	}
}
