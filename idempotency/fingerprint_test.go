package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/internal/strictjson"
)

// A retry that re-serializes the same JSON replays with CanonicalJSONFingerprint; with the default,
// byte-exact fingerprint it is 422 idempotency_key_reused.
func TestCanonicalJSONFingerprintReplaysReserializedJSON(t *testing.T) {
	same := []struct{ name, first, retry string }{
		{"members reordered", `{"account":"acc_1","side":"buy"}`, `{"side":"buy","account":"acc_1"}`},
		{"whitespace", `{"account":"acc_1","side":"buy"}`, "{\n  \"account\": \"acc_1\",\n\t\"side\" : \"buy\"\r\n}\n"},
		{"nested reordered", `{"a":{"y":[1,{"q":true,"p":null}],"x":"1"},"b":[]}`, `{"b":[ ],"a":{"x":"1","y":[1,{"p":null,"q":true}]}}`},
		{"string escapes", `{"name":"A/é\u2028"}`, `{"name":"\u0041\/\u00e9\u2028"}`},
		{"surrogate pair escaped", `{"emoji":"😀"}`, `{"emoji":"\ud83d\ude00"}`},
		{"escaped member name", `{"side":"buy"}`, `{"\u0073ide":"buy"}`},
		{"number forms", `{"qty":100,"price":1.5,"zero":0,"small":0.001}`, `{"qty":1e2,"price":1.50,"zero":-0.0,"small":1E-3}`},
		{"exponent forms", `[1000000000000000000000,12.5]`, `[1e+21,125e-1]`},
		{"top-level scalar", `"x"`, ` "x" `},
		{"not JSON: the same bytes", `side=buy&account=acc_1`, `side=buy&account=acc_1`},
		{"empty body", ``, ``},
	}
	differ := []struct{ name, first, retry string }{
		{"another value", `{"side":"buy"}`, `{"side":"sell"}`},
		{"array order", `{"items":[1,2]}`, `{"items":[2,1]}`},
		{"a string is not a number", `{"qty":1}`, `{"qty":"1"}`},
		{"amounts one double apart", `{"amount":9007199254740993}`, `{"amount":9007199254740992}`},
		{"member name case", `{"side":"buy"}`, `{"Side":"buy"}`},
		{"a member more", `{"side":"buy"}`, `{"side":"buy","note":null}`},
		{"duplicate members: bytes", `{"side":"buy","side":"sell"}`, `{"side":"sell","side":"buy"}`},
		{"not JSON: other bytes", `side=buy&account=acc_1`, `account=acc_1&side=buy`},
		{"JSON, then not", `{"side":"buy"}`, `{"side":"buy"}x`},
	}
	run := func(t *testing.T, fp func(*http.Request, []byte) (idempotency.Fingerprint, error), first, retry string) *httptest.ResponseRecorder {
		h := &orders{}
		mw := must(idempotency.New(&idempotency.Options{Fingerprint: fp})).Handler(h)
		w := serve(mw, req("POST", "/v1/orders", "k1", authA, first))
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		w = serve(mw, req("POST", "/v1/orders", "k1", authA, retry))
		require.EqualValues(t, 1, h.calls.Load(), "the handler runs once")
		return w
	}
	for _, tc := range same {
		t.Run("same/"+tc.name, func(t *testing.T) {
			w := run(t, idempotency.CanonicalJSONFingerprint, tc.first, tc.retry)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
			if tc.first != tc.retry {
				requireProblem(t, run(t, nil, tc.first, tc.retry), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
			}
		})
	}
	for _, tc := range differ {
		t.Run("differ/"+tc.name, func(t *testing.T) {
			requireProblem(t, run(t, idempotency.CanonicalJSONFingerprint, tc.first, tc.retry), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
		})
	}
	t.Run("method, path and query still count", func(t *testing.T) {
		r := func(method, target string) idempotency.Fingerprint {
			fp, err := idempotency.CanonicalJSONFingerprint(req(method, target, "k", authA, order), []byte(order))
			require.NoError(t, err)
			return fp
		}
		base := r("POST", "/v1/orders?a=1&b=2")
		require.Equal(t, base, r("POST", "/v1/orders?b=2&a=1"))
		require.NotEqual(t, base, r("PUT", "/v1/orders?a=1&b=2"))
		require.NotEqual(t, base, r("POST", "/v1/order?a=1&b=2"))
		require.NotEqual(t, base, r("POST", "/v1/orders?a=1&b=3"))
	})
	t.Run("a canonical digest is never a body's bytes", func(t *testing.T) {
		// The default's body hash of the canonical JSON's bytes is not the canonical digest: the
		// two kinds of fingerprint never meet, whatever bytes a client crafts.
		r := req("POST", "/v1/orders", "k", authA, "")
		canon, err := idempotency.CanonicalJSONFingerprint(r, []byte(`{"a":1}`))
		require.NoError(t, err)
		require.NotEqual(t, idempotency.NewFingerprint("POST", "/v1/orders", "", sha256.Sum256([]byte(`{"a":1}`))), canon)
	})
}

// A team's own Fingerprint decides on every path that compares fingerprints: the claim stores it,
// a duplicate in flight is 409 or 422 by it, a completed key replays or is 422 by it. This one says
// the request is its X-Order-Ref header, whatever the body.
func TestCustomFingerprintOnEveryPath(t *testing.T) {
	var calls atomic.Int64
	byRef := func(r *http.Request, body []byte) (idempotency.Fingerprint, error) {
		calls.Add(1)
		ref := r.Header.Get("X-Order-Ref")
		if ref == "" {
			return idempotency.Fingerprint{}, apierror.Invalid(apierror.Header("X-Order-Ref", "order_ref_missing", "is required"))
		}
		if ref == "broken" {
			return idempotency.Fingerprint{}, errors.New("fingerprint backend down")
		}
		return idempotency.NewFingerprint(r.Method, r.URL.EscapedPath(), "", sha256.Sum256([]byte(ref))), nil
	}
	store := memstore.New(nil)
	m := must(idempotency.New(&idempotency.Options{Store: store, Fingerprint: byRef}))
	started, release := make(chan struct{}), make(chan struct{})
	h := &orders{}
	mw := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.calls.Load() == 0 {
			close(started)
			<-release
		}
		h.ServeHTTP(w, r)
	}))
	send := func(ref, body string) *httptest.ResponseRecorder {
		r := req("POST", "/v1/orders", "k1", authA, body)
		if ref != "" {
			r.Header.Set("X-Order-Ref", ref)
		}
		return serve(mw, r)
	}

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- send("ref-1", order) }()
	<-started
	// The claim stored the custom fingerprint.
	rec, err := store.Lookup(context.Background(), driver.Key{Scope: idempotency.CredentialScope(authA), Key: "k1"}, time.Now())
	require.NoError(t, err)
	want := idempotency.NewFingerprint("POST", "/v1/orders", "", sha256.Sum256([]byte("ref-1")))
	require.Equal(t, want, rec.Fingerprint)

	// In flight: the same reference with another body is the same request (409); another reference
	// is another request (422).
	requireProblem(t, send("ref-1", `{"other":"body"}`), http.StatusConflict, idempotency.CodeKeyInUse)
	requireProblem(t, send("ref-2", order), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
	close(release)
	require.Equal(t, http.StatusCreated, (<-first).Code)

	// Completed: replayed by the reference, whatever the body; another reference is 422.
	replay := send("ref-1", `{"other":"body"}`)
	require.Equal(t, http.StatusCreated, replay.Code)
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
	requireProblem(t, send("ref-2", order), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)

	// Its errors are answered, and the handler does not run: a located problem as it is, anything
	// else as the opaque 500.
	p := requireProblem(t, send("", order), http.StatusBadRequest, "order_ref_missing")
	require.Equal(t, "X-Order-Ref", p.Errors[0].Name)
	w := send("broken", order)
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.NotContains(t, w.Body.String(), "fingerprint backend down")
	require.EqualValues(t, 1, h.calls.Load())
	require.EqualValues(t, 7, calls.Load(), "called once per request")
	require.EqualValues(t, 2, m.Stats().Rejected)

	// The function gets the body the handler reads.
	var got string
	m2 := must(idempotency.New(&idempotency.Options{Fingerprint: func(r *http.Request, body []byte) (idempotency.Fingerprint, error) {
		got = string(body)
		return idempotency.CanonicalJSONFingerprint(r, body)
	}}))
	require.Equal(t, http.StatusCreated, serve(m2.Handler(&orders{}), req("POST", "/v1/orders", "k1", authA, strings.Repeat("b", 100))).Code)
	require.Equal(t, strings.Repeat("b", 100), got)
}

// The canonical form of scalars, arrays and the refusals, byte for byte (objects carry their values'
// digests, so they are checked by equivalence above and in FuzzCanonicalJSON).
func TestCanonicalJSONForm(t *testing.T) {
	cases := []struct{ in, want string }{
		{`0`, `0`}, {`-0`, `0`}, {`0.000`, `0`}, {`-0e10`, `0`}, {`0e-99999`, `0`},
		{`1`, `1`}, {`-1`, `-1`}, {`1.0`, `1`}, {`10`, `1e1`}, {`100`, `1e2`}, {`1e2`, `1e2`}, {`1E+2`, `1e2`},
		{`1.00E+2`, `1e2`}, {`10e1`, `1e2`}, {`0.1`, `1e-1`}, {`0.010`, `1e-2`}, {`1.5`, `15e-1`}, {`150.5`, `1505e-1`},
		{`123.456e3`, `123456`}, {`1e0000000000000000000000002`, `1e2`}, {`9007199254740993`, `9007199254740993`},
		{`1e400`, `1e400`}, {`-1e-400`, `-1e-400`}, {`0e1000000000000000`, `0`},
		{`1.50e1000000000000000000`, `15e999999999999999999`}, {`-100e-0001000000000000000000`, `-1e-999999999999999998`},
		{`"A\/\u00e9\ud83d\ude00"`, `"A/é😀"`}, {`"\b\f\n\r\t\u0001\u001f\u007f\""`, `"\b\f\n\r\t\u0001\u001f` + "\x7f" + `\""`},
		{`"\u2028<&>"`, "\"\u2028<&>\""},
		{` [ 1 , "x" , true , false , null , [ ] ] `, `[1,"x",true,false,null,[]]`},
		{`{}`, `{}`}, {` { } `, `{}`},
	}
	for _, tc := range cases {
		got, ok := idempotency.CanonicalJSON([]byte(tc.in))
		require.True(t, ok, "%s", tc.in)
		require.Equal(t, tc.want, string(got), "%s", tc.in)
	}
	for _, in := range []string{
		``, ` `, `x`, `01`, `-`, `1.`, `.1`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `Infinity`, `tru`, `nul`, `truex`,
		`"`, `"\"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"\ud800"`, `"\udc00"`,
		`"\ud800\u0041"`, `"\ud800x"`, `[`, `[1,]`, `[,1]`, `[1 2]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{a:1}`,
		`{"a":1 "b":2}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":1}`, `{"b":{"a":1,"a":1}}`, `1 2`, "\ufeff1",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		_, ok := idempotency.CanonicalJSON([]byte(in))
		require.False(t, ok, "%q is not strict JSON", in)
		require.Error(t, strictjson.Decode([]byte(in), new(json.RawMessage), strictjson.Options{}),
			"%q: the strict decoder refuses what the canonical form refuses", in)
	}
	deep := strings.Repeat(`{"a":[`, 5000) + strings.Repeat("]}", 5000)
	_, ok := idempotency.CanonicalJSON([]byte(deep))
	require.True(t, ok, "10,000 levels are followed")
	require.NoError(t, strictjson.Decode([]byte(deep), new(json.RawMessage), strictjson.Options{}),
		"the strict decoder follows as deep as the canonical form")
}
