package apikey

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Sandbox); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	k, _ := New(Live)
	s := k.Reveal()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(s); err != nil {
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
	k, _ := New(Live)
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer "+k.Reveal())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(r); err == nil {
			b.Fatal("admitted")
		}
	}
}
