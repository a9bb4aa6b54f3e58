package apikey

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/syncbuf"
	"github.com/svcplatform/conventions/webhook"
)

func TestIssue(t *testing.T) {
	clk := newClock()
	tests := []struct {
		name    string
		opts    *IssuerOptions
		ev      Evaluation
		env     Environment
		base    string
		expires time.Time
	}{
		{"sandbox by default", nil, Evaluation{Licensee: "lic_a"}, Sandbox, DefaultSandboxBaseURL, clk.Now().Add(DefaultSandboxTTL)},
		{"sandbox explicitly", nil, Evaluation{Licensee: "lic_a", Environment: Sandbox}, Sandbox, DefaultSandboxBaseURL, clk.Now().Add(DefaultSandboxTTL)},
		{"live never expires by default", nil, Evaluation{Licensee: "lic_a", Environment: Live}, Live, DefaultLiveBaseURL, time.Time{}},
		{"evaluation TTL", nil, Evaluation{Licensee: "lic_a", TTL: 14 * 24 * time.Hour}, Sandbox, DefaultSandboxBaseURL, clk.Now().Add(14 * 24 * time.Hour)},
		{"configured URLs and TTLs",
			&IssuerOptions{SandboxBaseURL: "https://sb.example", LiveBaseURL: "https://api.example", SandboxTTL: time.Hour, LiveTTL: 365 * 24 * time.Hour},
			Evaluation{Licensee: "lic_a", Environment: Live}, Live, "https://api.example", clk.Now().Add(365 * 24 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := IssuerOptions{}
			if tc.opts != nil {
				opts = *tc.opts
			}
			opts.Now = clk.Now
			store := NewMemoryCredentialStore()
			iss := must(NewIssuer(store, &opts))
			c, err := iss.Issue(context.Background(), tc.ev)
			require.NoError(t, err)
			require.Equal(t, tc.env, c.Environment)
			require.Equal(t, tc.ev.Licensee, c.Licensee)
			require.Equal(t, tc.base, c.BaseURL)
			require.True(t, tc.expires.Equal(c.ExpiresAt), "expires %v, want %v", c.ExpiresAt, tc.expires)
			require.True(t, strings.HasPrefix(c.KeyID, "key_"))
			require.True(t, strings.HasPrefix(c.WebhookSecret, webhook.SecretPrefix))
			k, err := Parse(c.APIKey)
			require.NoError(t, err)
			require.Equal(t, tc.env, k.Environment())

			// Only the hash is stored.
			stored, err := store.Get(context.Background(), HashKey(c.APIKey))
			require.NoError(t, err)
			require.Equal(t, c.KeyID, stored.ID)
			require.True(t, clk.Now().Equal(stored.CreatedAt))
			require.NotContains(t, fmt.Sprintf("%#v", stored), c.APIKey)

			p, err := iss.Resolve(context.Background(), k)
			require.NoError(t, err)
			require.Equal(t, Principal{Licensee: "lic_a", Environment: tc.env, KeyID: c.KeyID, ExpiresAt: c.ExpiresAt}, p)
		})
	}
}

func TestIssueRefusesBadEvaluations(t *testing.T) {
	iss := must(NewIssuer(nil, nil))
	tests := []struct {
		name string
		ev   Evaluation
	}{
		{"no licensee", Evaluation{}},
		{"licensee with a space", Evaluation{Licensee: "lic a"}},
		{"licensee with a control character", Evaluation{Licensee: "lic\n"}},
		{"licensee too long", Evaluation{Licensee: strings.Repeat("a", MaxLicenseeLen+1)}},
		{"unknown environment", Evaluation{Licensee: "lic_a", Environment: "test"}},
		{"negative TTL", Evaluation{Licensee: "lic_a", TTL: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := iss.Issue(context.Background(), tc.ev)
			require.ErrorIs(t, err, ErrInvalidEvaluation)
		})
	}
	_, err := iss.Issue(context.Background(), Evaluation{Licensee: strings.Repeat("a", MaxLicenseeLen)})
	require.NoError(t, err, "the longest licensee is accepted")
}

func TestIssueStoreFailure(t *testing.T) {
	iss := must(NewIssuer(failingStore{}, nil))
	_, err := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a"})
	require.ErrorIs(t, err, errStoreDown)
}

func TestResolveExpiry(t *testing.T) {
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now, SandboxTTL: time.Hour}))
	c := issue(t, iss, "lic_a", Sandbox)
	k, err := Parse(c.APIKey)
	require.NoError(t, err)
	tests := []struct {
		at   time.Time
		want error
	}{
		{c.ExpiresAt.Add(-time.Hour), nil},
		{c.ExpiresAt.Add(-time.Nanosecond), nil},
		{c.ExpiresAt, ErrExpired}, // the expiry instant itself is outside the key's life
		{c.ExpiresAt.Add(time.Hour), ErrExpired},
	}
	for _, tc := range tests {
		t.Run(tc.at.Sub(c.ExpiresAt).String(), func(t *testing.T) {
			clk.Set(tc.at)
			_, err := iss.Resolve(context.Background(), k)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

func TestRevoke(t *testing.T) {
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now}))
	ctx := context.Background()
	a := issue(t, iss, "lic_a", Sandbox)
	b := issue(t, iss, "lic_a", Sandbox)
	live := issue(t, iss, "lic_a", Live)
	other := issue(t, iss, "lic_b", Sandbox)
	resolve := func(c Credentials) error {
		k, err := Parse(c.APIKey)
		require.NoError(t, err)
		_, err = iss.Resolve(ctx, k)
		return err
	}

	require.NoError(t, iss.Revoke(ctx, a.KeyID))
	require.ErrorIs(t, resolve(a), ErrRevoked)
	require.NoError(t, resolve(b), "revoking one key leaves the licensee's others")
	require.ErrorIs(t, iss.Revoke(ctx, "key_nobody"), ErrCredentialNotFound)

	clk.Advance(time.Minute)
	n, err := iss.EndEvaluation(ctx, "lic_a")
	require.NoError(t, err)
	require.Equal(t, 1, n, "b only: a was already revoked")
	require.ErrorIs(t, resolve(b), ErrRevoked)
	require.NoError(t, resolve(live), "ending an evaluation never touches production keys")
	require.NoError(t, resolve(other), "nor another licensee's")

	// Revocation wins over a later expiry and is reported as such in server-side errors.
	clk.Advance(DefaultSandboxTTL)
	require.ErrorIs(t, resolve(a), ErrRevoked)
	require.ErrorIs(t, resolve(other), ErrExpired)
}

func TestResolveUnknownAndFailures(t *testing.T) {
	ctx := context.Background()
	k, err := New(Sandbox)
	require.NoError(t, err)
	_, err = must(NewIssuer(nil, nil)).Resolve(ctx, k)
	require.ErrorIs(t, err, ErrUnknown)
	_, err = must(NewIssuer(nil, nil)).Resolve(ctx, Key{})
	require.ErrorIs(t, err, ErrUnknown)

	_, err = must(NewIssuer(failingStore{}, nil)).Resolve(ctx, k)
	require.ErrorIs(t, err, errStoreDown)
	require.NotErrorIs(t, err, ErrUnknown, "a store failure must not read as an unknown key")
}

// looseStore answers every Get with its one credential, as a store that matched loosely would.
type looseStore struct {
	MemoryCredentialStore
	c Credential
}

func (s *looseStore) Get(context.Context, KeyHash) (Credential, error) { return s.c, nil }

func TestResolveChecksTheStoresAnswer(t *testing.T) {
	ctx := context.Background()
	k, err := New(Sandbox)
	require.NoError(t, err)
	other, err := New(Sandbox)
	require.NoError(t, err)
	t.Run("hash differs", func(t *testing.T) {
		s := &looseStore{c: Credential{ID: "key_1", Hash: other.Hash(), Licensee: "lic_a", Environment: Sandbox}}
		_, err := must(NewIssuer(s, nil)).Resolve(ctx, k)
		require.ErrorIs(t, err, ErrUnknown)
	})
	t.Run("environment differs", func(t *testing.T) {
		s := &looseStore{c: Credential{ID: "key_1", Hash: k.Hash(), Licensee: "lic_a", Environment: Live}}
		_, err := must(NewIssuer(s, nil)).Resolve(ctx, k)
		require.ErrorIs(t, err, ErrUnknown)
	})
}

func TestCredentialsNeverPrintSecrets(t *testing.T) {
	c := issue(t, must(NewIssuer(nil, nil)), "lic_a", Sandbox)
	logger, buf := syncbuf.Logger()
	logger.Info("issued", "credentials", c)
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c),
		"String": c.String(), "slog": buf.String(),
	} {
		t.Run(name, func(t *testing.T) {
			require.NotContains(t, out, c.APIKey)
			require.NotContains(t, out, c.WebhookSecret)
			require.Contains(t, out, c.KeyID)
		})
	}
	// The issuance response is the one place they appear, once.
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(b), `"api_key":"`+c.APIKey+`"`)
	require.Contains(t, string(b), `"webhook_signing_secret":"`+c.WebhookSecret+`"`)
}

func TestIssuerLogsNoSecrets(t *testing.T) {
	logger, buf := syncbuf.Logger()
	iss := must(NewIssuer(nil, &IssuerOptions{Logger: logger}))
	c := issue(t, iss, "lic_a", Sandbox)
	require.NoError(t, iss.Revoke(context.Background(), c.KeyID))
	_, err := iss.EndEvaluation(context.Background(), "lic_a")
	require.NoError(t, err)
	out := buf.String()
	require.Contains(t, out, c.KeyID)
	require.NotContains(t, out, c.APIKey)
	require.NotContains(t, out, c.WebhookSecret)
}

// A production key without an expiry is logged as never expiring, not as the year 1.
func TestIssuerLogsNeverExpiring(t *testing.T) {
	logger, buf := syncbuf.Logger()
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now, Logger: logger}))
	live := issue(t, iss, "lic_a", Live)
	sb := issue(t, iss, "lic_a", Sandbox)
	out := buf.String()
	require.Contains(t, out, `"expires_at":"never"`)
	require.NotContains(t, out, "0001-01-01")
	require.Contains(t, out, `"expires_at":"`+sb.ExpiresAt.Format(time.RFC3339))
	require.Equal(t, "never", live.LogValue().Group()[4].Value.String())
}
