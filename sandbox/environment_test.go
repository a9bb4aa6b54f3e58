package sandbox

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

func TestInSandbox(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	require.False(t, InSandbox(r), "nobody authenticated")
	with := func(p apikey.Principal) *http.Request { return r.WithContext(apikey.NewContext(r.Context(), p)) }
	require.True(t, InSandbox(with(apikey.Principal{Licensee: "lic_a", Environment: apikey.Sandbox})))
	require.False(t, InSandbox(with(apikey.Principal{Licensee: "lic_a", Environment: apikey.Live})))
	require.False(t, InSandbox(with(apikey.Principal{Environment: apikey.Sandbox})), "an invalid principal is no principal")
}
