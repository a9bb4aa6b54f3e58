package apikey

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// restrictedServer is an Authenticator in front of a mux whose routes each require a permission.
func restrictedServer(t *testing.T) (*Issuer, http.Handler) {
	t.Helper()
	iss := must(NewIssuer(nil, &IssuerOptions{Permissions: []string{"orders:read", "orders:write", "events:read", "api_keys:write"}}))
	auth := must(NewAuthenticator(iss, nil))
	mux := http.NewServeMux()
	mux.Handle("GET /orders/{id}", auth.Require("orders:read", echoPrincipal))
	mux.Handle("POST /orders", auth.Require("orders:write", echoPrincipal))
	mux.Handle("GET /events", auth.Require("events:read", echoPrincipal))
	return iss, auth.Handler(mux)
}

func issueWith(t *testing.T, iss *Issuer, perms ...string) Credentials {
	t.Helper()
	var p []string
	if perms != nil {
		p = perms
	}
	c, err := iss.Issue(context.Background(), Evaluation{Licensee: "lic_1", Environment: Live, Permissions: p})
	require.NoError(t, err)
	return c
}

// TestRequireRefusesOutsidePermissions: a restricted key is let through inside its permissions
// (write includes read) and refused outside them with a 403 located at the Authorization header
// that names the permission; the full key passes everywhere.
func TestRequireRefusesOutsidePermissions(t *testing.T) {
	iss, h := restrictedServer(t)
	full := issueWith(t, iss)
	reader := issueWith(t, iss, "orders:read")
	writer := issueWith(t, iss, "orders:write")
	for _, tc := range []struct {
		name, key, method, path string
		want                    int
		missing                 string
	}{
		{"full key reads", full.APIKey, "GET", "/orders/ord_1", 200, ""},
		{"full key writes", full.APIKey, "POST", "/orders", 200, ""},
		{"reader reads", reader.APIKey, "GET", "/orders/ord_1", 200, ""},
		{"reader cannot write", reader.APIKey, "POST", "/orders", 403, "orders:write"},
		{"reader cannot read events", reader.APIKey, "GET", "/events", 403, "events:read"},
		{"write includes read", writer.APIKey, "GET", "/orders/ord_1", 200, ""},
		{"writer writes", writer.APIKey, "POST", "/orders", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = `{}`
			}
			rec := do(t, h, tc.method, tc.path, tc.key, body)
			require.Equal(t, tc.want, rec.Code, rec.Body.String())
			if tc.want != 403 {
				return
			}
			requireConforms(t, rec)
			p := problem(t, rec)
			require.Equal(t, CodePermissionDenied, p.Code)
			require.Contains(t, p.Detail, tc.missing)
			require.Len(t, p.Errors, 1)
			require.Equal(t, apierror.LocationHeader, p.Errors[0].Location)
			require.Equal(t, HeaderAuthorization, p.Errors[0].Name)
			require.Contains(t, rec.Body.String(), `"required_permission":"`+tc.missing+`"`)
			require.NotContains(t, rec.Body.String(), tc.key)
		})
	}
}

// TestRequireWiringMistakes: without an Authenticator in front, or with a malformed permission,
// every request gets the opaque 500, never a pass.
func TestRequireWiringMistakes(t *testing.T) {
	iss := must(NewIssuer(nil, nil))
	auth := must(NewAuthenticator(iss, nil))
	key := issue(t, iss, "lic_1", Live).APIKey
	rec := do(t, auth.Require("orders:read", echoPrincipal), "GET", "/", key, "")
	require.Equal(t, 500, rec.Code, "no Authenticator ran")
	for _, bad := range []string{"", "orders", "orders:delete", "Orders:read", "orders:read:x", ":read"} {
		rec := do(t, auth.Handler(auth.Require(bad, echoPrincipal)), "GET", "/", key, "")
		require.Equal(t, 500, rec.Code, "permission %q", bad)
	}
	var zero *Authenticator
	rec = do(t, auth.Handler(zero.Require("orders:read", echoPrincipal)), "GET", "/", key, "")
	require.Equal(t, 200, rec.Code, "the zero Authenticator's Require still checks the principal")
}

// TestIssueRestricted: permissions are checked against the declared ones, sorted and deduplicated;
// an empty list is not the full key.
func TestIssueRestricted(t *testing.T) {
	iss := must(NewIssuer(nil, &IssuerOptions{Permissions: []string{"orders:read", "orders:write"}}))
	ctx := context.Background()
	c, err := iss.Issue(ctx, Evaluation{Licensee: "lic_1", Permissions: []string{"orders:write", "orders:read", "orders:write"}})
	require.NoError(t, err)
	require.Equal(t, []string{"orders:read", "orders:write"}, c.Permissions)
	k := must(Parse(c.APIKey))
	p, err := iss.Resolve(ctx, k)
	require.NoError(t, err)
	require.Equal(t, []string{"orders:read", "orders:write"}, p.Permissions)
	require.True(t, p.Allows("orders:read"))
	require.False(t, p.Allows("events:read"))

	for name, perms := range map[string][]string{
		"empty":      {},
		"undeclared": {"events:read"},
		"malformed":  {"orders"},
	} {
		_, err := iss.Issue(ctx, Evaluation{Licensee: "lic_1", Permissions: perms})
		require.ErrorIs(t, err, ErrInvalidEvaluation, name)
		require.ErrorIs(t, err, ErrInvalidPermission, name)
	}
	_, err = NewIssuer(nil, &IssuerOptions{Permissions: []string{"orders:all"}})
	require.ErrorIs(t, err, ErrInvalidPermission)

	full := issue(t, iss, "lic_1", Live)
	p, err = iss.Resolve(ctx, must(Parse(full.APIKey)))
	require.NoError(t, err)
	require.Nil(t, p.Permissions)
	require.True(t, p.Allows("anything:write"))
	require.False(t, Principal{}.Allows("orders:read"), "the zero principal has nothing")
}
