package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	testSecret = "whsec_test_secret"
	testOther  = "whsec_other"
	testBody   = `{"a":1}`
	testTS     = 1767225600 // 2026-01-01T00:00:00Z
	// Computed independently (Python's hmac module) over "1767225600.{"a":1}".
	testSigSecret = "3cde36233d9b3d0004bf8381645daaee4139c891a3043a76b02f3ee8770ea82f"
	testSigOther  = "d0bd819b2e33f6bc6edc99f8a97dbedbfadcbd70a588e64a66cf7497735ade94"
)

func fixedClock(unix int64) func() time.Time { return func() time.Time { return time.Unix(unix, 0) } }

func mustVerifier(t testing.TB, secrets []string, opts *VerifierOptions) *Verifier {
	t.Helper()
	v, err := NewVerifier(secrets, opts)
	require.NoError(t, err)
	return v
}

func TestSignKnownAnswer(t *testing.T) {
	h, err := Sign([]byte(testBody), time.Unix(testTS, 0), testSecret)
	require.NoError(t, err)
	require.Equal(t, "t=1767225600,v1="+testSigSecret, h)

	h, err = Sign([]byte(testBody), time.Unix(testTS, 999_000_000), testSecret, testOther)
	require.NoError(t, err)
	require.Equal(t, "t=1767225600,v1="+testSigSecret+",v1="+testSigOther, h, "sub-second part is dropped; one v1 per secret in order")
}

func TestSignRejectsMissingSecrets(t *testing.T) {
	for name, secrets := range map[string][]string{
		"none":         nil,
		"empty":        {""},
		"empty second": {testSecret, ""},
	} {
		t.Run(name, func(t *testing.T) {
			h, err := Sign([]byte(testBody), time.Unix(testTS, 0), secrets...)
			require.ErrorIs(t, err, ErrNoSecret)
			require.Empty(t, h)
		})
	}
}

func TestSignMatchesReference(t *testing.T) {
	// Stripe's reference: HMAC over the decimal timestamp, ".", and the payload, hex-encoded.
	for _, size := range []int{0, 1, 63, 64, 65, 1024, 70_000} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i * 7)
		}
		now := time.Unix(1700000000+int64(size), 0)
		secret := NewSecret()
		h, err := Sign(body, now, secret)
		require.NoError(t, err)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(strconv.FormatInt(now.Unix(), 10) + "." + string(body)))
		require.Equal(t, "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+hex.EncodeToString(mac.Sum(nil)), h)
		require.NoError(t, mustVerifier(t, []string{secret}, &VerifierOptions{Now: func() time.Time { return now }}).Verify(h, body))
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	require.True(t, strings.HasPrefix(a, SecretPrefix))
	require.Len(t, a, len(SecretPrefix)+43) // 32 bytes, unpadded base64url
	require.NotEqual(t, a, b)
}

func TestNewVerifier(t *testing.T) {
	cases := []struct {
		name    string
		secrets []string
		opts    *VerifierOptions
		want    error
	}{
		{"nil secrets", nil, nil, ErrNoSecret},
		{"empty list", []string{}, nil, ErrNoSecret},
		{"empty secret", []string{""}, nil, ErrNoSecret},
		{"one empty among several", []string{testSecret, ""}, nil, ErrNoSecret},
		{"negative tolerance", []string{testSecret}, &VerifierOptions{Tolerance: -time.Second}, ErrNegativeTolerance},
		{"defaults", []string{testSecret}, nil, nil},
		{"zero options", []string{testSecret}, &VerifierOptions{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewVerifier(tc.secrets, tc.opts)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				require.Nil(t, v)
				return
			}
			require.NoError(t, err)
			require.Equal(t, DefaultTolerance, v.tolerance)
		})
	}
}

func TestZeroVerifierRejects(t *testing.T) {
	var v Verifier
	require.ErrorIs(t, v.Verify("t=1767225600,v1="+testSigSecret, []byte(testBody)), ErrNoSecret)
	var nilV *Verifier
	require.ErrorIs(t, nilV.Verify("t=1767225600,v1="+testSigSecret, []byte(testBody)), ErrNoSecret)
}

// TestVerifyErrors covers every verification outcome with a header built by hand.
func TestVerifyErrors(t *testing.T) {
	good := "t=1767225600,v1=" + testSigSecret
	upper := strings.ToUpper(testSigSecret)
	cases := []struct {
		name   string
		header string
		body   string
		now    int64
		want   error // nil: accepted
	}{
		{"valid", good, testBody, testTS, nil},
		{"valid uppercase hex", "t=1767225600,v1=" + upper, testBody, testTS, nil},
		{"valid with v0 and a future scheme", "t=1767225600,v0=abc,v1=" + testSigSecret + ",v2=zzz", testBody, testTS, nil},
		{"valid second of several v1", "t=1767225600,v1=" + testSigOther + ",v1=" + testSigSecret, testBody, testTS, nil},
		{"valid v1 before t", "v1=" + testSigSecret + ",t=1767225600", testBody, testTS, nil},
		{"missing header", "", testBody, testTS, ErrMissingHeader},
		{"no t", "v1=" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"no v1", "t=1767225600", testBody, testTS, ErrNoSignature},
		{"only v0", "t=1767225600,v0=" + testSigSecret, testBody, testTS, ErrNoSignature},
		{"duplicate t", "t=1767225600,t=1767225600,v1=" + testSigSecret, testBody, testTS, ErrDuplicateTimestamp},
		{"duplicate t that differs", "t=1767225600,v1=" + testSigSecret + ",t=1767225601", testBody, testTS, ErrDuplicateTimestamp},
		{"empty t", "t=,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"negative t", "t=-1767225600,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"plus t", "t=+1767225600,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"zero t", "t=0,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"leading zero t", "t=01767225600,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"fractional t", "t=1767225600.5,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"milliseconds t", "t=1767225600000,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"t after year 9999", "t=253402300800,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"overflowing t", "t=99999999999999999999999,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"hex t", "t=0x69,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"empty item", "t=1767225600,,v1=" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"trailing comma", good + ",", testBody, testTS, ErrMalformedHeader},
		{"leading comma", "," + good, testBody, testTS, ErrMalformedHeader},
		{"item without =", "t=1767225600,v1" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"empty key", "t=1767225600,=x,v1=" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"space after comma", "t=1767225600, v1=" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"space in t", "t= 1767225600,v1=" + testSigSecret, testBody, testTS, ErrInvalidTimestamp},
		{"short v1", "t=1767225600,v1=" + testSigSecret[:62], testBody, testTS, ErrMalformedHeader},
		{"long v1", "t=1767225600,v1=" + testSigSecret + "00", testBody, testTS, ErrMalformedHeader},
		{"non-hex v1", "t=1767225600,v1=" + testSigSecret[:63] + "g", testBody, testTS, ErrMalformedHeader},
		{"empty v1", "t=1767225600,v1=", testBody, testTS, ErrMalformedHeader},
		{"v1 with = inside", "t=1767225600,v1==" + testSigSecret[1:], testBody, testTS, ErrMalformedHeader},
		{"malformed extra v1 beside a valid one", "t=1767225600,v1=zz,v1=" + testSigSecret + ",v1=" + testSigSecret[:10], testBody, testTS, nil},
		{"malformed v1 beside a wrong one", "t=1767225600,v1=zz,v1=" + testSigOther, testBody, testTS, ErrMalformedHeader},
		{"unknown schemes of any value", "t=1767225600,v0=,v2=not hex at all,x-future=1=2,v1=" + testSigSecret, testBody, testTS, nil},
		{"too many v1", "t=1767225600" + strings.Repeat(",v1="+testSigOther, maxSignatures) + ",v1=" + testSigSecret, testBody, testTS, ErrMalformedHeader},
		{"wrong secret", "t=1767225600,v1=" + testSigOther, testBody, testTS, ErrSignatureMismatch},
		{"all zero signature", "t=1767225600,v1=" + strings.Repeat("0", 64), testBody, testTS, ErrSignatureMismatch},
		{"tampered body", good, `{"a":2}`, testTS, ErrSignatureMismatch},
		{"empty body", good, "", testTS, ErrSignatureMismatch},
		{"body with trailing newline", good, testBody + "\n", testTS, ErrSignatureMismatch},
		{"other timestamp", "t=1767225601,v1=" + testSigSecret, testBody, testTS, ErrSignatureMismatch},
		{"flipped bit", "t=1767225600,v1=" + flipLastHex(testSigSecret), testBody, testTS, ErrSignatureMismatch},
		{"old but within tolerance", good, testBody, testTS + 300, nil},
		{"too old by a second", good, testBody, testTS + 301, ErrTooOld},
		{"too old by a day", good, testBody, testTS + 86400, ErrTooOld},
		{"new but within tolerance", good, testBody, testTS - 300, nil},
		{"too new by a second", good, testBody, testTS - 301, ErrTooNew},
		{"too new by a day", good, testBody, testTS - 86400, ErrTooNew},
		{"clock at zero time", good, testBody, time.Time{}.Unix(), ErrTooNew},
		{"forged and stale", "t=1767225600,v1=" + testSigOther, testBody, testTS + 86400, ErrSignatureMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := mustVerifier(t, []string{testSecret}, &VerifierOptions{Now: fixedClock(tc.now)})
			ts, err := v.VerifyTime(tc.header, []byte(tc.body))
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, time.Unix(testTS, 0), ts)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.True(t, ts.IsZero())
			requireNoSecretIn(t, err.Error())
			require.True(t, strings.HasPrefix(err.Error(), "webhook: "), err.Error())
		})
	}
}

func flipLastHex(s string) string {
	last := s[len(s)-1]
	if last == '0' {
		last = '1'
	} else {
		last = '0'
	}
	return s[:len(s)-1] + string(last)
}

func requireNoSecretIn(t *testing.T, msg string) {
	t.Helper()
	for _, secret := range []string{testSecret, testOther, testSigSecret, testSigOther, strings.ToUpper(testSigSecret)} {
		require.NotContains(t, msg, secret)
	}
	// No 64-hex run at all: an expected or received signature never appears.
	run := 0
	for i := 0; i < len(msg); i++ {
		if hexValue[msg[i]] <= 0xf {
			run++
			require.Less(t, run, 64, "error message contains a signature-like hex string: %q", msg)
		} else {
			run = 0
		}
	}
}

func TestVerifyRotation(t *testing.T) {
	body := []byte(testBody)
	now := time.Unix(testTS, 0)
	oldSecret, newSecret := NewSecret(), NewSecret()
	cases := []struct {
		name     string
		signWith []string
		verifyBy []string
		ok       bool
	}{
		{"producer rotated first", []string{newSecret, oldSecret}, []string{oldSecret}, true},
		{"consumer rotated first", []string{oldSecret}, []string{newSecret, oldSecret}, true},
		{"both rotated", []string{newSecret}, []string{newSecret}, true},
		{"consumer dropped the old one too early", []string{oldSecret}, []string{newSecret}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Sign(body, now, tc.signWith...)
			require.NoError(t, err)
			err = mustVerifier(t, tc.verifyBy, &VerifierOptions{Now: func() time.Time { return now }}).Verify(h, body)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrSignatureMismatch)
				require.NotContains(t, err.Error(), newSecret)
				require.NotContains(t, err.Error(), oldSecret)
			}
		})
	}
}

func TestVerifyToleranceOption(t *testing.T) {
	h := "t=1767225600,v1=" + testSigSecret
	cases := []struct {
		tolerance time.Duration
		offset    int64
		want      error
	}{
		{time.Second, 1, nil},
		{time.Second, 2, ErrTooOld},
		{time.Second, -1, nil},
		{time.Second, -2, ErrTooNew},
		{1500 * time.Millisecond, 1, nil},
		{1500 * time.Millisecond, 2, ErrTooOld},
		{1500 * time.Millisecond, -2, ErrTooNew},
		{time.Hour, 3600, nil},
		{time.Hour, 3601, ErrTooOld},
		{time.Hour, -3600, nil},
		{time.Hour, -3601, ErrTooNew},
		{500 * time.Millisecond, 0, nil},
		{500 * time.Millisecond, 1, ErrTooOld},
	}
	for _, tc := range cases {
		t.Run(tc.tolerance.String()+"/"+strconv.FormatInt(tc.offset, 10), func(t *testing.T) {
			v := mustVerifier(t, []string{testSecret}, &VerifierOptions{Tolerance: tc.tolerance, Now: fixedClock(testTS + tc.offset)})
			err := v.Verify(h, []byte(testBody))
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

func TestVerifyDefaultClockIsNow(t *testing.T) {
	v := mustVerifier(t, []string{testSecret}, nil)
	body := []byte(testBody)
	h, err := Sign(body, time.Now(), testSecret)
	require.NoError(t, err)
	require.NoError(t, v.Verify(h, body))
	h, err = Sign(body, time.Now().Add(-time.Hour), testSecret)
	require.NoError(t, err)
	require.ErrorIs(t, v.Verify(h, body), ErrTooOld)
}

func TestVerifyConcurrent(t *testing.T) {
	// Pooled HMAC states must never be shared by two verifications at once.
	secrets := []string{NewSecret(), NewSecret()}
	v := mustVerifier(t, secrets, &VerifierOptions{Now: fixedClock(testTS)})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				body := []byte(strconv.Itoa(g*1000 + i))
				h, err := Sign(body, time.Unix(testTS, 0), secrets[i%2])
				if err != nil {
					t.Error(err)
					return
				}
				if err := v.Verify(h, body); err != nil {
					t.Errorf("valid signature rejected: %v", err)
					return
				}
				if err := v.Verify(h, append(body, 'x')); !errors.Is(err, ErrSignatureMismatch) {
					t.Errorf("tampered body: got %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestVerifyAllocations(t *testing.T) {
	body := make([]byte, 64<<10)
	h, err := Sign(body, time.Unix(testTS, 0), testSecret)
	require.NoError(t, err)
	v := mustVerifier(t, []string{testOther, testSecret}, &VerifierOptions{Now: fixedClock(testTS)})
	verify := func() {
		if err := v.Verify(h, body); err != nil {
			t.Fatal(err)
		}
	}
	verify()

	// Bytes, in every build mode: a copy of the body (the peers' "<t>.<body>" string) would show up as
	// 64 KiB per verification.
	const runs = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		verify()
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	require.Less(t, perRun, uint64(4<<10), "verification allocates %d bytes per 64 KiB body", perRun)

	if raceEnabled {
		return // the race detector makes sync.Pool drop items at random, so counts vary
	}
	require.Zero(t, testing.AllocsPerRun(100, verify), "a verification reuses pooled HMAC state and parses the header in place")
}

func TestParseHeader(t *testing.T) {
	var h sigHeader
	require.NoError(t, parseHeader("t=1767225600,v1="+testSigSecret+",v0=x,v1="+testSigOther, &h))
	require.Equal(t, int64(testTS), h.t)
	require.Equal(t, "1767225600", h.ts)
	require.Equal(t, 2, h.n)
	require.Equal(t, testSigSecret, hex.EncodeToString(h.sig[0][:]))
	require.Equal(t, testSigOther, hex.EncodeToString(h.sig[1][:]))
	allocs := testing.AllocsPerRun(100, func() {
		var h sigHeader
		_ = parseHeader("t=1767225600,v1="+testSigSecret, &h)
	})
	require.Zero(t, allocs)
}

func TestHexValueTable(t *testing.T) {
	require.Len(t, hexValue, 256)
	for c := range 256 {
		want := byte(0xff)
		if v, err := strconv.ParseUint(string(rune(c)), 16, 8); err == nil && c < 128 {
			want = byte(v)
		}
		require.Equal(t, want, hexValue[c], "byte %#x", c)
	}
}

// A Signer writes exactly what Sign writes, for any body size, any number of secrets (past what fits
// on its stack), any timestamp an int64 holds, and from many goroutines sharing its pools.
func TestSignerMatchesSign(t *testing.T) {
	secrets := []string{NewSecret(), NewSecret(), NewSecret()}
	times := []time.Time{time.Unix(testTS, 0), time.Unix(0, 0), time.Unix(-62135596800, 0), time.Unix(1<<62, 0), time.Unix(-1<<62, 0)}
	for n := 1; n <= len(secrets); n++ {
		s, err := NewSigner(secrets[:n])
		require.NoError(t, err)
		for _, size := range []int{0, 1, 64, 70_000} {
			body := make([]byte, size)
			for i := range body {
				body[i] = byte(i * 13)
			}
			for _, now := range times {
				want, err := Sign(body, now, secrets[:n]...)
				require.NoError(t, err)
				require.Equal(t, want, signWith(t, s, body, now), "secrets %d, size %d, t %d", n, size, now.Unix())
			}
		}
	}
	got, err := NewSigner([]string{testSecret})
	require.NoError(t, err)
	require.Equal(t, "t=1767225600,v1="+testSigSecret, signWith(t, got, []byte(testBody), time.Unix(testTS, 0)))

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				body := []byte(strconv.Itoa(g*1000 + i))
				want, _ := Sign(body, time.Unix(testTS, 0), testSecret)
				if h, err := got.Sign(body, time.Unix(testTS, 0)); err != nil || h != want {
					t.Errorf("goroutine %d message %d: %s != %s", g, i, h, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewSignerRejectsMissingSecrets(t *testing.T) {
	_, err := NewSigner(nil)
	require.ErrorIs(t, err, ErrNoSecret)
	_, err = NewSigner([]string{testSecret, ""})
	require.ErrorIs(t, err, ErrNoSecret)
}

// signWith is Signer.Sign for a Signer the test built with secrets.
func signWith(t *testing.T, s *Signer, body []byte, at time.Time) string {
	t.Helper()
	h, err := s.Sign(body, at)
	require.NoError(t, err)
	return h
}

// The zero Signer signs nothing: it says so instead of sending a header without a signature.
func TestZeroSignerRefusesToSign(t *testing.T) {
	for _, s := range []*Signer{nil, {}} {
		h, err := s.Sign([]byte("body"), time.Unix(testTS, 0))
		require.ErrorIs(t, err, ErrNoSecret)
		require.Empty(t, h)
	}
}
