package benchmarks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gogithub "github.com/google/go-github/v75/github"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/svcplatform/conventions/webhook"
)

// bodySizes are the webhook payloads measured: a typical event, and a large one where the hashing
// dominates and any copy of the body shows up in B/op.
var bodySizes = []struct {
	name string
	n    int
}{
	{"1KiB", 1 << 10},
	{"64KiB", 64 << 10},
}

// benchSecret is one secret for every library. Ours, Stripe and go-github key the HMAC with the
// string's bytes; Standard Webhooks and Svix base64-decode what follows "whsec_" (24 bytes here). Both
// keys fit in one SHA-256 block, so the HMAC costs the same either way.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// eventBody returns a JSON event envelope of exactly n bytes, the same bytes for every library.
func eventBody(n int) []byte {
	const head = `{"id":"evt_01jbench","sequence":1,"type":"order.created","created":1767225600,"api_version":"v1","data":{"pad":"`
	const tail = `"}}`
	if n < len(head)+len(tail) {
		panic("benchmarks: body size too small for the envelope")
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	for len(b) < n-len(tail) {
		b = append(b, 'a'+byte(len(b)%26))
	}
	return append(b, tail...)
}

// webhookCase is one library's way to sign or to verify a prepared delivery. setup runs outside the
// timer; it signs with the real clock because the peers check the timestamp against time.Now.
type webhookCase struct {
	name  string
	setup func(tb testing.TB, body []byte, now time.Time) func() error
}

// hmacLimit is the floor any verifier of this scheme pays: one HMAC-SHA256 over "<t>.<body>" with a
// keyed state that is reset instead of rebuilt, the sum kept on the stack, and one constant-time
// compare. It parses no header and formats nothing.
type hmacLimit struct {
	mac  hash.Hash
	sum  [sha256.Size]byte
	want []byte
	ts   []byte
}

func newHMACLimit(body []byte, now time.Time) *hmacLimit {
	l := &hmacLimit{
		mac: hmac.New(sha256.New, []byte(benchSecret)),
		ts:  strconv.AppendInt(nil, now.Unix(), 10),
	}
	l.ts = append(l.ts, '.')
	l.mac.Write(l.ts)
	l.mac.Write(body)
	l.want = l.mac.Sum(nil)
	return l
}

func (l *hmacLimit) run(body []byte) bool {
	l.mac.Reset()
	l.mac.Write(l.ts)
	l.mac.Write(body)
	return hmac.Equal(l.mac.Sum(l.sum[:0]), l.want)
}

// errMismatch stands for any library's "signature does not match" in the benchmarks' own checks.
type errMismatch struct{ lib string }

func (e errMismatch) Error() string { return "benchmarks: " + e.lib + " rejected its own signature" }

// standardHeaders builds the three webhook-* headers Standard Webhooks and Svix read.
func standardHeaders(id string, now time.Time, sig string) http.Header {
	h := make(http.Header, 3)
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return h
}

// standardKey is benchSecret as the Standard Webhooks and Svix libraries decode it.
func standardKey(tb testing.TB) []byte {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(benchSecret, "whsec_"))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// verifyCases are the verifiers side by side. Each setup signs the body with that library's own
// scheme, so every verifier does a full, successful verification per operation.
func verifyCases() []webhookCase {
	return []webhookCase{
		{"ours", func(tb testing.TB, body []byte, now time.Time) func() error {
			header, err := webhook.Sign(body, now, benchSecret)
			if err != nil {
				tb.Fatal(err)
			}
			v, err := webhook.NewVerifier([]string{benchSecret}, &webhook.VerifierOptions{Now: func() time.Time { return now }})
			if err != nil {
				tb.Fatal(err)
			}
			return func() error { return v.Verify(header, body) }
		}},
		{"limit", func(tb testing.TB, body []byte, now time.Time) func() error {
			l := newHMACLimit(body, now)
			return func() error {
				if !l.run(body) {
					return errMismatch{"limit"}
				}
				return nil
			}
		}},
		{"stripe", func(tb testing.TB, body []byte, now time.Time) func() error {
			p := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: benchSecret, Timestamp: now})
			return func() error { return stripewebhook.ValidatePayload(body, p.Header, benchSecret) }
		}},
		{"standardwebhooks", func(tb testing.TB, body []byte, now time.Time) func() error {
			wh, err := standardwebhooks.NewWebhook(benchSecret)
			if err != nil {
				tb.Fatal(err)
			}
			sig, err := wh.Sign("msg_bench", now, body)
			if err != nil {
				tb.Fatal(err)
			}
			h := standardHeaders("msg_bench", now, sig)
			return func() error { return wh.Verify(body, h) }
		}},
		{"svix", func(tb testing.TB, body []byte, now time.Time) func() error {
			wh, err := svix.NewWebhook(benchSecret)
			if err != nil {
				tb.Fatal(err)
			}
			sig, err := wh.Sign("msg_bench", now, body)
			if err != nil {
				tb.Fatal(err)
			}
			h := standardHeaders("msg_bench", now, sig)
			return func() error { return wh.Verify(body, h) }
		}},
		{"gogithub", func(tb testing.TB, body []byte, now time.Time) func() error {
			// GitHub signs the body alone ("sha256=<hex>"), with no timestamp and so no replay window.
			mac := hmac.New(sha256.New, []byte(benchSecret))
			mac.Write(body)
			sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
			secret := []byte(benchSecret)
			return func() error { return gogithub.ValidateSignature(sig, body, secret) }
		}},
	}
}

// signCases are the signers side by side. go-github has no signing function (GitHub signs), so it
// has no row here.
func signCases() []webhookCase {
	return []webhookCase{
		{"ours", func(tb testing.TB, body []byte, now time.Time) func() error {
			// A producer that signs many deliveries keeps a Signer per endpoint, as a consumer keeps a
			// Verifier (and as Svix and Standard Webhooks keep their keyed Webhook value).
			s, err := webhook.NewSigner([]string{benchSecret})
			if err != nil {
				tb.Fatal(err)
			}
			return func() error {
				if sig, err := s.Sign(body, now); err != nil || sig == "" {
					return errMismatch{"ours"}
				}
				return nil
			}
		}},
		{"ours-oneshot", func(tb testing.TB, body []byte, now time.Time) func() error {
			// The package-level Sign, which keys a fresh HMAC per call.
			return func() error {
				_, err := webhook.Sign(body, now, benchSecret)
				return err
			}
		}},
		{"limit", func(tb testing.TB, body []byte, now time.Time) func() error {
			l := newHMACLimit(body, now)
			return func() error {
				if !l.run(body) {
					return errMismatch{"limit"}
				}
				return nil
			}
		}},
		{"stripe", func(tb testing.TB, body []byte, now time.Time) func() error {
			u := &stripewebhook.UnsignedPayload{Payload: body, Secret: benchSecret, Timestamp: now}
			return func() error {
				if p := stripewebhook.GenerateTestSignedPayload(u); p.Header == "" {
					return errMismatch{"stripe"}
				}
				return nil
			}
		}},
		{"standardwebhooks", func(tb testing.TB, body []byte, now time.Time) func() error {
			wh, err := standardwebhooks.NewWebhookRaw(standardKey(tb))
			if err != nil {
				tb.Fatal(err)
			}
			return func() error {
				_, err := wh.Sign("msg_bench", now, body)
				return err
			}
		}},
		{"svix", func(tb testing.TB, body []byte, now time.Time) func() error {
			wh, err := svix.NewWebhookRaw(standardKey(tb))
			if err != nil {
				tb.Fatal(err)
			}
			return func() error {
				_, err := wh.Sign("msg_bench", now, body)
				return err
			}
		}},
	}
}

func runWebhookCases(b *testing.B, cases []webhookCase) {
	for _, size := range bodySizes {
		body := eventBody(size.n)
		b.Run(size.name, func(b *testing.B) {
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					op := c.setup(b, body, time.Now())
					if err := op(); err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if err := op(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkWebhookVerify verifies one signed delivery per operation, 1 KiB and 64 KiB bodies.
func BenchmarkWebhookVerify(b *testing.B) { runWebhookCases(b, verifyCases()) }

// BenchmarkWebhookSign signs one delivery per operation, 1 KiB and 64 KiB bodies.
func BenchmarkWebhookSign(b *testing.B) { runWebhookCases(b, signCases()) }
