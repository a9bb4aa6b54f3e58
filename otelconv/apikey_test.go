package otelconv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ratelimit"
)

// keyService is the real Authenticator and rate limit (keyed by apikey.RateLimitKey, a burst of 3,
// refilling once a second on a clock that does not move) behind the service's Writer, all observed
// by h.
func keyService(t testing.TB, h *harness, iss *apikey.Issuer) http.Handler {
	t.Helper()
	auth, err := apikey.NewAuthenticator(iss, &apikey.AuthenticatorOptions{Hooks: h.tel.APIKey()})
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := ratelimit.NewTokenBucket(1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := ratelimit.New(bucket, apikey.RateLimitKey, &ratelimit.Options{Now: func() time.Time { return edgesNow }, Hooks: h.tel.RateLimit()})
	if err != nil {
		t.Fatal(err)
	}
	problems := apierror.Writer{Hooks: h.tel.APIError()}
	return apierror.WithRequestID(problems.Handler(auth.Handler(limit.Handler(noContent))))
}

func call(t testing.TB, h http.Handler, authorization string) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func issueKey(t testing.TB, iss *apikey.Issuer, env apikey.Environment) string {
	t.Helper()
	c, err := iss.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_a", Environment: env})
	if err != nil {
		t.Fatal(err)
	}
	return c.APIKey
}

// TestAPIKeyAndRateLimitMetrics drives the real Authenticator and rate limit: 5 production requests
// over a burst of 3 are 2 rate-limited 429s, counted both as rate-limit refusals and as problems;
// sandbox requests are never limited; hostile keys are counted by cause, without the key.
func TestAPIKeyAndRateLimitMetrics(t *testing.T) {
	h := newHarness(t, nil)
	iss, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	live, box := issueKey(t, iss, apikey.Live), issueKey(t, iss, apikey.Sandbox)
	unknown, err := apikey.New(apikey.Live)
	if err != nil {
		t.Fatal(err)
	}
	revoked := issueKey(t, iss, apikey.Live)
	k, _ := apikey.Parse(revoked)
	c, _ := iss.Store().Get(context.Background(), k.Hash())
	if err := iss.Revoke(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	svc := keyService(t, h, iss)

	var statuses []int
	for range 5 {
		statuses = append(statuses, call(t, svc, "Bearer "+live))
	}
	for range 5 {
		statuses = append(statuses, call(t, svc, "Bearer "+box))
	}
	forged := "sk_live_" + strings.Repeat("a", 40)
	relabelled := "sk_live_" + strings.TrimPrefix(box, "sk_sandbox_")
	for _, a := range []string{"", "Basic dXNlcjpwYXNz", "Bearer " + forged, "Bearer " + relabelled, "Bearer " + unknown.Reveal(), "Bearer " + revoked} {
		statuses = append(statuses, call(t, svc, a))
	}
	want := []int{204, 204, 204, 429, 429, 204, 204, 204, 204, 204, 401, 401, 401, 401, 401, 401}
	if len(statuses) != len(want) {
		t.Fatalf("statuses %v", statuses)
	}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("statuses %v, want %v", statuses, want)
		}
	}

	env := func(e apikey.Environment) attribute.KeyValue { return attrEnvironment.String(string(e)) }
	for _, c := range []struct {
		name  string
		want  int64
		attrs []attribute.KeyValue
	}{
		{"svc.apikey.authentications", 5, []attribute.KeyValue{attrAuthResult.String("ok"), env(apikey.Live)}},
		{"svc.apikey.authentications", 5, []attribute.KeyValue{attrAuthResult.String("ok"), env(apikey.Sandbox)}},
		{"svc.apikey.authentications", 1, []attribute.KeyValue{attrAuthResult.String("missing")}},
		{"svc.apikey.authentications", 1, []attribute.KeyValue{attrAuthResult.String("scheme_unsupported")}},
		{"svc.apikey.authentications", 2, []attribute.KeyValue{attrAuthResult.String("checksum_mismatch")}},
		{"svc.apikey.authentications", 1, []attribute.KeyValue{attrAuthResult.String("unknown"), env(apikey.Live)}},
		{"svc.apikey.authentications", 1, []attribute.KeyValue{attrAuthResult.String("revoked"), env(apikey.Live)}},
		{"svc.apikey.authentications", 16, nil},
		{"svc.ratelimit.checks", 3, []attribute.KeyValue{attrLimitResult.String("allowed"), env(apikey.Live)}},
		{"svc.ratelimit.checks", 2, []attribute.KeyValue{attrLimitResult.String("refused"), env(apikey.Live)}},
		{"svc.ratelimit.checks", 5, []attribute.KeyValue{attrLimitResult.String("exempt"), env(apikey.Sandbox)}},
		{"svc.ratelimit.checks", 10, nil},
		{"svc.apierror.problems", 2, []attribute.KeyValue{attrStatus.Int(429), attrCode.String(apierror.CodeRateLimited)}},
		{"svc.apierror.problems", 1, []attribute.KeyValue{attrStatus.Int(401), attrCode.String(apikey.CodeMissing)}},
		{"svc.apierror.problems", 1, []attribute.KeyValue{attrStatus.Int(401), attrCode.String(apikey.CodeSchemeUnsupported)}},
		{"svc.apierror.problems", 2, []attribute.KeyValue{attrStatus.Int(401), attrCode.String(apikey.CodeMalformed)}},
		{"svc.apierror.problems", 2, []attribute.KeyValue{attrStatus.Int(401), attrCode.String(apikey.CodeInvalid)}},
		{"svc.apierror.problems", 8, nil},
	} {
		if got := h.sum(t, c.name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.attrs, got, c.want)
		}
	}
	if n, _ := h.histCount(t, "svc.apikey.authentication.duration"); n != 16 {
		t.Errorf("authentications timed: %d, want 16", n)
	}
	// The points of unparsable keys carry no environment, and no attribute anywhere holds a key.
	for _, set := range h.attributeSets(t, "svc.apikey.authentications") {
		if v, _ := set.Value(attrAuthResult); v.AsString() == "checksum_mismatch" && set.HasValue(attrEnvironment) {
			t.Errorf("an unparsed key got an environment: %v", set)
		}
	}
	for _, name := range []string{"svc.apikey.authentications", "svc.ratelimit.checks", "svc.apierror.problems", "svc.apikey.authentication.duration"} {
		for _, set := range h.attributeSets(t, name) {
			for _, kv := range set.ToSlice() {
				if s := kv.Value.String(); strings.Contains(s, "sk_") || strings.Contains(s, "lic_") {
					t.Errorf("%s: attribute %s=%s", name, kv.Key, s)
				}
			}
		}
	}
}

// TestAPIKeyLicenseeOptIn: with Options.LicenseeAttribute, authentications and checks carry the
// licensee; failures have none to carry.
func TestAPIKeyLicenseeOptIn(t *testing.T) {
	h := newHarness(t, &Options{LicenseeAttribute: true})
	iss, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := keyService(t, h, iss)
	live := issueKey(t, iss, apikey.Live)
	for range 4 {
		call(t, svc, "Bearer "+live)
	}
	call(t, svc, "")
	lic := attrLicensee.String("lic_a")
	if got := h.sum(t, "svc.apikey.authentications", attrAuthResult.String("ok"), lic); got != 4 {
		t.Errorf("authentications of lic_a = %d, want 4", got)
	}
	if got := h.sum(t, "svc.ratelimit.checks", attrLimitResult.String("refused"), lic); got != 1 {
		t.Errorf("refusals of lic_a = %d, want 1", got)
	}
	if got := h.sum(t, "svc.apikey.authentications", attrAuthResult.String("missing")); got != 1 {
		t.Errorf("missing = %d, want 1", got)
	}
}

// TestAPIKeySpan: the request's span gets the authentication result, and an event for a refusal by
// the rate limit.
func TestAPIKeySpan(t *testing.T) {
	h := newHarness(t, nil)
	iss, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := keyService(t, h, iss)
	live := issueKey(t, iss, apikey.Live)
	for range 4 {
		ctx, span := h.tel.tracer.Start(context.Background(), "GET")
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+live)
		svc.ServeHTTP(httptest.NewRecorder(), r)
		span.End()
	}
	spans := h.ended("GET")
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, s := range spans {
		if !matches(attribute.NewSet(s.Attributes()...), []attribute.KeyValue{attrAuthResult.String("ok"), attrEnvironment.String("live")}) {
			t.Errorf("span %d attributes %v", i, s.Attributes())
		}
		var names []string
		for _, e := range s.Events() {
			names = append(names, e.Name)
		}
		want := ""
		if i == 3 {
			want = "svc.ratelimit.refused,svc.apierror.problem"
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("span %d events %q, want %q", i, got, want)
		}
	}
}

// BenchmarkAuthenticateObserved is Authenticate with no hooks and with otelconv's.
func BenchmarkAuthenticateObserved(b *testing.B) {
	iss, _ := apikey.NewIssuer(nil, nil)
	live := issueKey(b, iss, apikey.Live)
	for _, observed := range []bool{false, true} {
		name := "nil"
		opts := &apikey.AuthenticatorOptions{}
		if observed {
			name = "otel"
			opts.Hooks = newHarness(b, nil).tel.APIKey()
		}
		b.Run(name, func(b *testing.B) {
			auth, _ := apikey.NewAuthenticator(iss, opts)
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r.Header.Set("Authorization", "Bearer "+live)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := auth.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAuthOutcomesKnown: numAuthOutcomes is one more than the last apikey.Outcome. It fails when
// apikey grows an outcome: raise numAuthOutcomes, and add the value to svc.apikey.auth.result in
// doc.go and README.md.
func TestAuthOutcomesKnown(t *testing.T) {
	for o := apikey.Outcome(1); int(o) < numAuthOutcomes; o++ {
		if s := o.String(); s == "" || s == "invalid" {
			t.Errorf("apikey.Outcome(%d) is %q: numAuthOutcomes is past the last outcome", o, s)
		}
	}
	if s := apikey.Outcome(numAuthOutcomes).String(); s != "invalid" {
		t.Errorf("apikey.Outcome(%d) is %q, which otelconv does not count: raise numAuthOutcomes", numAuthOutcomes, s)
	}
}

// TestAuthOutcomeUnknown: an outcome this otelconv does not know (a newer apikey's) is counted and
// timed as _OTHER, with its environment, and set on the span; the zero Outcome, which the
// Authenticator never reports, is not counted. Neither panics.
func TestAuthOutcomeUnknown(t *testing.T) {
	h := newHarness(t, nil)
	hooks := h.tel.APIKey()
	ctx, span := h.tel.tracer.Start(context.Background(), "GET")
	for _, o := range []apikey.Outcome{apikey.Outcome(numAuthOutcomes), apikey.Outcome(numAuthOutcomes + 1), 255} {
		hooks.Authenticated(ctx, apikey.Observation{Outcome: o, Environment: apikey.Live, Duration: time.Millisecond})
	}
	hooks.Authenticated(ctx, apikey.Observation{Environment: apikey.Live})
	span.End()
	other := []attribute.KeyValue{attrAuthResult.String(otherValue), attrEnvironment.String(string(apikey.Live))}
	if got := h.sum(t, "svc.apikey.authentications", other...); got != 3 {
		t.Errorf("authentications as %s = %d, want 3", otherValue, got)
	}
	if got := h.sum(t, "svc.apikey.authentications"); got != 3 {
		t.Errorf("authentications = %d, want 3", got)
	}
	if n, _ := h.histCount(t, "svc.apikey.authentication.duration", other...); n != 3 {
		t.Errorf("authentications timed as %s: %d, want 3", otherValue, n)
	}
	if s := h.ended("GET"); len(s) != 1 || !matches(attribute.NewSet(s[0].Attributes()...), other) {
		t.Errorf("span attributes %v", s)
	}
}
