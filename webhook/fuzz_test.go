package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// referenceParse is a deliberately naive parser (strings.Split, as Stripe's) used to cross-check the
// allocation-free one: both must agree on every header the fast one accepts.
func referenceParse(header string) (ts string, sigs []string, ok bool) {
	seenT := false
	for _, item := range strings.Split(header, ",") {
		k, v, found := strings.Cut(item, "=")
		if !found || k == "" {
			return "", nil, false
		}
		switch k {
		case "t":
			if seenT {
				return "", nil, false
			}
			seenT, ts = true, v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	return ts, sigs, seenT && len(sigs) > 0
}

func FuzzParseHeader(f *testing.F) {
	f.Add("t=1767225600,v1=" + testSigSecret)
	f.Add("t=1767225600,v1=" + testSigSecret + ",v1=" + testSigOther + ",v0=abc")
	f.Add("v1=" + testSigSecret + ",t=1767225600")
	f.Add("t=1767225600,t=1,v1=" + testSigSecret)
	f.Add("t=,v1=")
	f.Add(",,,")
	f.Add("t=99999999999999999999,v1=" + testSigSecret)
	f.Add("=")
	f.Add("")
	f.Fuzz(func(t *testing.T, header string) {
		var h sigHeader
		err := parseHeader(header, &h)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) && !errors.Is(err, ErrMissingHeader) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		ts, sigs, ok := referenceParse(header)
		if !ok {
			t.Fatalf("accepted a header the reference parser rejects: %q", header)
		}
		if ts != h.ts || strconv.FormatInt(h.t, 10) != ts || h.t < 1 || h.t > maxTimestamp {
			t.Fatalf("timestamp %q parsed as %d (%q)", ts, h.t, h.ts)
		}
		if len(sigs) != h.n || h.n > maxSignatures {
			t.Fatalf("%d v1 values, parsed %d", len(sigs), h.n)
		}
		for i, s := range sigs {
			want, err := hex.DecodeString(s)
			if err != nil || len(s) != 64 {
				t.Fatalf("accepted a v1 that is not 64 hex digits: %q", s)
			}
			if string(want) != string(h.sig[i][:]) {
				t.Fatalf("v1 %d: %q decoded as %x", i, s, h.sig[i])
			}
		}
	})
}

// FuzzVerify feeds arbitrary headers and bodies, and mutations of valid ones, to a verifier. It must
// never panic, and whenever it accepts, the header must really carry the HMAC of that body under the
// secret, computed here independently.
func FuzzVerify(f *testing.F) {
	f.Add("t=1767225600,v1="+testSigSecret, []byte(testBody), uint8(0), uint16(0))
	f.Add("t=1767225600,v1="+testSigOther+",v1="+testSigSecret, []byte(testBody), uint8(1), uint16(3))
	f.Add("t=1767225600,v1="+testSigSecret, []byte(`{"a":2}`), uint8(2), uint16(20))
	f.Add("t=1767225601,v1="+testSigSecret, []byte(testBody), uint8(3), uint16(7))
	f.Add("", []byte(nil), uint8(0), uint16(0))
	v, err := NewVerifier([]string{testOther, testSecret}, &VerifierOptions{Now: fixedClock(testTS)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string, body []byte, mode uint8, pos uint16) {
		switch mode % 4 {
		case 1:
			// A genuinely signed body, then one byte of the body changed.
			header = mustSign(t, body)
			if len(body) > 0 {
				body = append([]byte(nil), body...)
				body[int(pos)%len(body)] ^= 0x01
			}
		case 2:
			// A genuinely signed body, then one byte of the header changed.
			header = mustSign(t, body)
			b := []byte(header)
			b[int(pos)%len(b)] ^= 0x01
			header = string(b)
		case 3:
			// A genuinely signed body: must be accepted.
			header = mustSign(t, body)
			if err := v.Verify(header, body); err != nil {
				t.Fatalf("rejected a valid signature: %v", err)
			}
			return
		}
		err := v.Verify(header, body)
		if err == nil && !carriesValidSignature(header, body) {
			t.Fatalf("accepted a wrong signature: header %q body %q", header, body)
		}
		if err != nil && strings.Contains(err.Error(), expectedSig(header, body)) {
			t.Fatalf("error message contains the expected signature: %v", err)
		}
	})
}

func mustSign(t *testing.T, body []byte) string {
	h, err := Sign(body, time.Unix(testTS, 0), testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// carriesValidSignature recomputes, with hmac.New and string concatenation, whether some v1 of header
// is the HMAC of "<t>.<body>" under one of the fuzz verifier's secrets.
func carriesValidSignature(header string, body []byte) bool {
	ts, sigs, ok := referenceParse(header)
	if !ok {
		return false
	}
	for _, secret := range []string{testOther, testSecret} {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		want := mac.Sum(nil)
		for _, s := range sigs {
			got, err := hex.DecodeString(s)
			if err == nil && hmac.Equal(got, want) {
				return true
			}
		}
	}
	return false
}

func expectedSig(header string, body []byte) string {
	ts, _, _ := referenceParse(header)
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(ts + "." + string(body)))
	return hex.EncodeToString(mac.Sum(nil))
}

func FuzzParseSequence(f *testing.F) {
	for _, s := range []string{"1", "42", "9223372036854775807", "9223372036854775808", "0", "007", "+1", "-1", " 1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSequence(s)
		if err != nil {
			if !errors.Is(err, ErrMalformedSequence) && !errors.Is(err, ErrMissingSequence) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if n == 0 || n > MaxSequence || strconv.FormatUint(n, 10) != s {
			t.Fatalf("accepted %q as %d", s, n)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","sequence":3,"type":"order.created","created":1767225600,"api_version":"v1","data":{}}`))
	f.Add([]byte(`{"id":"evt_1","sequence":-1,"type":"t"}`))
	f.Add([]byte(`{"id":"","sequence":1e3,"type":null}`))
	f.Add([]byte(`[{"id":"evt_1"}]`))
	f.Add([]byte(`{"data":{"a":[1,2,{"b":"\u0000"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := DecodeEvent(body)
		if err != nil {
			var p *apierror.Error
			if !errors.As(err, &p) || p.Status != http.StatusBadRequest || len(p.Errors) == 0 {
				t.Fatalf("not a located 400: %v", err)
			}
			return
		}
		if ev.ID == "" || ev.Type == "" || ev.Sequence == 0 || ev.Sequence > MaxSequence {
			t.Fatalf("accepted an envelope without id, type or a valid sequence: %+v", ev)
		}
	})
}
