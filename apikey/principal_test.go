package apikey

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

func TestPrincipalScope(t *testing.T) {
	require.Equal(t, "sandbox:lic_a", Principal{Licensee: "lic_a", Environment: Sandbox}.Scope())
	require.Equal(t, "live:lic_a", Principal{Licensee: "lic_a", Environment: Live}.Scope())
	require.Equal(t, "", Principal{}.Scope())
	require.Equal(t, "", Principal{Licensee: "lic_a"}.Scope())

	_, ok := FromContext(context.Background())
	require.False(t, ok)
	_, ok = FromContext(NewContext(context.Background(), Principal{Licensee: "lic_a"}))
	require.False(t, ok, "an invalid principal is no principal")
	scopeOf := func(ctx context.Context) (string, error) {
		return RequestScope(httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/orders", nil))
	}
	_, err := scopeOf(NewContext(context.Background(), Principal{Licensee: "lic_a"}))
	require.ErrorIs(t, err, ErrNoPrincipal, "an invalid principal has no scope")
	s, err := scopeOf(NewContext(context.Background(), Principal{Licensee: "lic_a", Environment: Live}))
	require.NoError(t, err)
	require.Equal(t, "live:lic_a", s)
}

func TestRequestHelpers(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	_, err := RequestScope(r)
	require.ErrorIs(t, err, ErrNoPrincipal)

	sb := r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: Sandbox}))
	s, err := RequestScope(sb)
	require.NoError(t, err)
	require.Equal(t, "sandbox:lic_a", s)

	live := r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: Live}))
	s, err = RequestScope(live)
	require.NoError(t, err)
	require.Equal(t, "live:lic_a", s)
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
		Licensee: RequestScope}))
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
