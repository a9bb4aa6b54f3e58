package sandbox

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func BenchmarkNewKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewKey(Sandbox); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseKey(b *testing.B) {
	k, _ := NewKey(Live)
	s := k.Reveal()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseKey(s); err != nil {
			b.Fatal(err)
		}
	}
}

// Authenticate is on every request: header, checksum, hash, lookup, constant-time compare.
func BenchmarkAuthenticate(b *testing.B) {
	iss := must(NewIssuer(nil, nil))
	c, _ := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a"})
	auth := must(NewAuthenticator(iss, nil))
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer "+c.APIKey)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}

// The refusal path: what an attacker spraying keys costs the server.
func BenchmarkAuthenticateUnknownKey(b *testing.B) {
	auth := must(NewAuthenticator(must(NewIssuer(nil, nil)), nil))
	k, _ := NewKey(Live)
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer "+k.Reveal())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(r); err == nil {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkRateLimitCheck(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rl := must(NewRateLimit(must(NewTokenBucket(1e9, 1e9, nil)), &RateLimitOptions{Now: func() time.Time { return now }}))
	for _, env := range []Environment{Sandbox, Live} {
		b.Run(string(env), func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: env}))
			b.ReportAllocs()
			for b.Loop() {
				if err := rl.Check(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTokenBucketManyLicensees(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tb := must(NewTokenBucket(1e9, 1e9, &TokenBucketOptions{MaxKeys: 1000}))
	ps := make([]Principal, 4096) // more than the bound: evictions on the way
	for i := range ps {
		ps[i] = Principal{Licensee: "lic_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Environment: Live}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := tb.Allow(ctx, ps[i%len(ps)].Scope(), now); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// okTransport answers every request 200 without a network.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func BenchmarkFaultTransport(b *testing.B) {
	var ft FaultTable
	_ = ft.Set("we_faulty", Faults{Drop: 0.1, Duplicate: 0.1, BadSignature: 0.1})
	tr := must(NewFaultTransport(okTransport{}, &ft, nil))
	defer tr.Close()
	body := strings.Repeat("x", 512)
	for _, ep := range []string{"we_clean", "we_faulty"} {
		b.Run(ep, func(b *testing.B) {
			ctx := ContextWithEndpoint(context.Background(), ep)
			b.ReportAllocs()
			for b.Loop() {
				r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://consumer.test/hooks", strings.NewReader(body))
				r.Header.Set("X-SVC-Signature", "t=1,v1="+strings.Repeat("ab", 32))
				resp, err := tr.RoundTrip(r)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}
