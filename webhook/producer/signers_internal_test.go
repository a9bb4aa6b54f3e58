package producer

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
)

func TestSignerCacheIsBounded(t *testing.T) {
	c := signerCache{max: 8}
	secret := webhook.NewSecret()
	for i := range 100 {
		_, err := c.get("we_"+strconv.Itoa(i), []string{secret})
		require.NoError(t, err)
		require.LessOrEqual(t, c.size(), 8)
	}
	require.Equal(t, 8, c.size())
}

func TestSignerCacheMatchesTheExactSecretList(t *testing.T) {
	var c signerCache
	at := time.Unix(1767225600, 0)
	a, b := webhook.NewSecret(), webhook.NewSecret()
	ep := Endpoint{ID: "we_a", Secrets: []string{a}}
	s1, err := c.get(ep.ID, ep.Secrets)
	require.NoError(t, err)
	s2, err := c.get(ep.ID, ep.Secrets)
	require.NoError(t, err)
	require.Same(t, s1, s2, "the same list reuses its Signer")

	for _, secrets := range [][]string{{b, a}, {a, b}, {b}, {a}} {
		ep.Secrets = secrets
		s, err := c.get(ep.ID, ep.Secrets)
		require.NoError(t, err)
		want, err := webhook.Sign([]byte("body"), at, secrets...)
		require.NoError(t, err)
		require.Equal(t, want, mustSign(t, s, []byte("body"), at), "signed with exactly %d secrets, in order", len(secrets))
	}
	require.Equal(t, 1, c.size(), "one entry per endpoint: a retired list is not kept")

	// The cache keeps its own copy of the list: a caller reusing its slice for other secrets must not
	// make the entry claim them.
	secrets := []string{a}
	_, err = c.get("we_c", secrets)
	require.NoError(t, err)
	secrets[0] = b
	s, err := c.get("we_c", secrets)
	require.NoError(t, err)
	want, err := webhook.Sign([]byte("body"), at, b)
	require.NoError(t, err)
	require.Equal(t, want, mustSign(t, s, []byte("body"), at))

	_, err = c.get("we_x", nil)
	require.ErrorIs(t, err, webhook.ErrNoSecret)
	_, err = c.get("we_x", []string{""})
	require.ErrorIs(t, err, webhook.ErrNoSecret)
}

// mustSign is Signer.Sign for a Signer the test built with secrets.
func mustSign(t *testing.T, s *webhook.Signer, body []byte, at time.Time) string {
	t.Helper()
	h, err := s.Sign(body, at)
	require.NoError(t, err)
	return h
}
