package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/svcplatform/conventions/webhook"
)

// When an endpoint's secret is rolled, the old secret signs beside the new one until it expires:
// every range page carries one v1 per secret, the newest first. A page verifies when any of its v1
// matches any secret listen holds (webhook.Verifier), so a listen that holds the old secret goes on
// working — until the old secret expires, when every page stops verifying at once. rollWatch sees
// that coming: it notes a page whose newest v1 none of listen's secrets made (a listen holding the new
// secret, whose pages also carry the old one's v1 until it expires, has nothing to be told), and
// listen says so, once.

// rollWatch is the transport of listen's range client. It is safe for concurrent use.
type rollWatch struct {
	base    http.RoundTripper
	secrets []string
	// foreign: a page since the last call of foreignSeen has a newest v1 none of the secrets made.
	foreign atomic.Bool
	// off: the notice was given, and pages are no longer looked at.
	off atomic.Bool
}

func newRollWatch(base http.RoundTripper, secrets []string) *rollWatch {
	return &rollWatch{base: base, secrets: secrets}
}

// RoundTrip reads a page's signature header, and looks at its body only while the page carries
// more than one v1 (a roll is under way) and listen has not yet said that the secret was rolled: a
// page that verifies with a single v1 was made with one of listen's secrets, and which of several v1
// listen's secrets made, only the HMACs tell. They are computed as the range client reads the body.
func (w *rollWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || w.off.Load() {
		return resp, err
	}
	ts, newest, n := v1Signatures(resp.Header.Get(webhook.HeaderSignature))
	if n < 2 {
		return resp, nil
	}
	macs := make([]hash.Hash, len(w.secrets))
	for i, s := range w.secrets {
		macs[i] = hmac.New(sha256.New, []byte(s))
		io.WriteString(macs[i], ts+".")
	}
	resp.Body = &sigCheck{ReadCloser: resp.Body, w: w, macs: macs, newest: newest}
	return resp, nil
}

// foreignSeen reports, and forgets, whether a page's newest v1 was none of the secrets'.
func (w *rollWatch) foreignSeen() bool { return w.foreign.Swap(false) }

// v1Signatures parses an X-SVC-Signature header, "t=…,v1=…,v1=…": the t= digits as signed, the
// first readable v1 (the newest secret's) and how many distinct readable v1 there are. A header
// the verifier refuses may give anything: its page does not verify, so nothing is made of it.
func v1Signatures(header string) (ts string, newest [sha256.Size]byte, n int) {
	var seen [][sha256.Size]byte
	for item := range strings.SplitSeq(header, ",") {
		key, val, _ := strings.Cut(item, "=")
		switch key {
		case "t":
			ts = val
		case "v1":
			var sig [sha256.Size]byte
			if len(val) != 2*sha256.Size {
				continue // unreadable: the verifier skips it too
			}
			if _, err := hex.Decode(sig[:], []byte(val)); err != nil || slices.Contains(seen, sig) {
				continue
			}
			if seen = append(seen, sig); len(seen) > 8 { // more than the verifier accepts
				return "", newest, 0
			}
		}
	}
	if ts == "" || len(seen) == 0 {
		return "", newest, 0
	}
	return ts, seen[0], len(seen)
}

// sigCheck is a page's body that computes its HMAC under each of listen's secrets as it is read,
// and at its end tells the watch when the newest v1 is none of them.
type sigCheck struct {
	io.ReadCloser
	w      *rollWatch
	macs   []hash.Hash
	newest [sha256.Size]byte
}

func (b *sigCheck) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, m := range b.macs {
		m.Write(p[:n])
	}
	if err == io.EOF && b.macs != nil {
		if !slices.ContainsFunc(b.macs, func(m hash.Hash) bool { return hmac.Equal(m.Sum(nil), b.newest[:]) }) {
			b.w.foreign.Store(true)
		}
		b.macs = nil
	}
	return n, err
}
