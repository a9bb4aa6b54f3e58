package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/webhook"
)

// maxVerifyBody bounds the body verify reads: far above any delivery (consumers cap them at 1 MiB).
const maxVerifyBody = 32 << 20

func runVerify(_ context.Context, e env, args []string) error {
	var (
		signature, bodyFile, sequence, at, endpoint string
		tolerance                                   time.Duration
	)
	f := newFlags(e, "svc verify", "--signature 't=…,v1=…' [--body FILE] [flags]", `
Check a captured delivery against the endpoint's signing secret (SVC_WEBHOOK_SECRET; several,
comma-separated, while a secret rotates): the X-SVC-Signature must be an HMAC-SHA256 of the body
exactly as received, made with the secret, within the tolerance of now (or of --at). The body is
read from --body, or from stdin. With --sequence (the X-SVC-Sequence header) the body's sequence
must match it; with --endpoint the body must name that endpoint.

Exit status 0 when the delivery is authentic, 1 when it is not, with the reason: the signature
header is malformed, no signature matches (the body or the secret differ from what was signed), the
signature is authentic but too old or too new, or the sequence or endpoint do not match.

  svc verify --signature "$SIG" --body delivery.json --sequence 42
  pbpaste | svc verify --signature "$SIG" --at 2026-11-25T10:00:00Z`)
	f.StringVar(&signature, "signature", "", "the X-SVC-Signature header's value (required)")
	f.StringVar(&bodyFile, "body", "", "file holding the raw body as received (default: stdin)")
	f.StringVar(&sequence, "sequence", "", "the X-SVC-Sequence header's value, checked against the body")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint the delivery was for, we_…, checked against the body")
	f.DurationVar(&tolerance, "tolerance", webhook.DefaultTolerance, "how far the signing time may lie from now (or --at), either way")
	f.StringVar(&at, "at", "", "check as of this instant instead of now: Unix seconds or RFC 3339, e.g. when the delivery was captured")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if signature == "" {
		return usagef("svc verify: --signature is required: the X-SVC-Signature header's value, t=…,v1=…")
	}
	if tolerance <= 0 {
		return usagef("svc verify: --tolerance must be positive: the timestamp check cannot be turned off")
	}
	now := time.Now()
	if at != "" {
		var err error
		if now, err = parseInstant(at); err != nil {
			return usagef("svc verify: --at %q: want Unix seconds or RFC 3339 (2026-11-25T10:00:00Z)", at)
		}
	}
	cfg, err := loadConfig(e, common{})
	if err != nil {
		return err
	}
	secrets, err := cfg.needSecrets()
	if err != nil {
		return err
	}
	body, from, err := readBody(e, bodyFile)
	if err != nil {
		return err
	}
	v, err := webhook.NewVerifier(secrets, &webhook.VerifierOptions{Tolerance: tolerance, Now: func() time.Time { return now }})
	if err != nil {
		return usagef("%s: %v", envSecret, err)
	}
	signed, err := v.VerifyTime(signature, body)
	if err != nil {
		return &invalidError{verifyReason(err, v, signature, body, from, now, tolerance, len(secrets))}
	}
	age := now.Sub(signed).Round(time.Second)
	when := fmt.Sprintf("%s ago", age)
	if age < 0 {
		when = fmt.Sprintf("%s ahead of now", -age)
	}
	fmt.Fprintf(e.stdout, "valid: signed with the secret at %s (%s, within the %s tolerance)\n",
		signed.UTC().Format(time.RFC3339), when, tolerance)
	if sequence == "" && endpoint == "" {
		return nil
	}
	ev, err := webhook.DecodeEvent(body)
	if err != nil {
		return &invalidError{fmt.Sprintf("the signature is authentic, but the body is not an event, so its sequence and endpoint cannot be checked: %v", err)}
	}
	if sequence != "" {
		if err := webhook.CheckSequence(sequence, &ev); err != nil {
			if errors.Is(err, webhook.ErrSequenceMismatch) {
				return &invalidError{fmt.Sprintf("X-SVC-Sequence %s does not match the signed body's sequence %d: the header was altered or mis-set", sequence, ev.Sequence)}
			}
			return &invalidError{fmt.Sprintf("X-SVC-Sequence %q: %v", sequence, err)}
		}
		fmt.Fprintf(e.stdout, "valid: X-SVC-Sequence %s matches the signed body\n", sequence)
	}
	if endpoint != "" {
		if ev.Endpoint != endpoint {
			return &invalidError{fmt.Sprintf("the signed body names endpoint %q, not %s: a delivery captured on its way to another endpoint", ev.Endpoint, endpoint)}
		}
		fmt.Fprintf(e.stdout, "valid: the signed body names endpoint %s\n", endpoint)
	}
	return nil
}

// verifyReason says exactly why a verification failed, and what to try.
func verifyReason(err error, v *webhook.Verifier, header string, body []byte, from string, now time.Time,
	tolerance time.Duration, secrets int) string {
	t := signedAt(header)
	switch {
	case errors.Is(err, webhook.ErrMalformedHeader):
		return fmt.Sprintf("the signature header is malformed (%v): it must be t=<unix seconds>,v1=<64 lowercase hex>[,v1=…]",
			strings.TrimPrefix(err.Error(), "webhook: "))
	case errors.Is(err, webhook.ErrSignatureMismatch):
		what := "the secret"
		if secrets > 1 {
			what = fmt.Sprintf("any of the %d secrets", secrets)
		}
		reason := fmt.Sprintf("no v1 signature matches %s: the body is not byte for byte what was signed (%s), or %s is not the endpoint's",
			what, from, envSecret)
		for _, cut := range []string{"\r\n", "\n"} {
			if trimmed, ok := bytes.CutSuffix(body, []byte(cut)); ok {
				if _, err := v.VerifyTime(header, trimmed); !errors.Is(err, webhook.ErrSignatureMismatch) {
					return reason + fmt.Sprintf("; it does match without the body's final %q, which the delivery did not have", cut)
				}
			}
		}
		return reason
	case errors.Is(err, webhook.ErrTooOld):
		return fmt.Sprintf("the signature is authentic, but it was made at %s, %s before %s: older than the %s tolerance (a replayed or long-queued delivery); to check an old capture, pass --at with when it was received",
			t.UTC().Format(time.RFC3339), now.Sub(t).Round(time.Second), instantName(now), tolerance)
	case errors.Is(err, webhook.ErrTooNew):
		return fmt.Sprintf("the signature is authentic, but it was made at %s, %s after %s: further ahead than the %s tolerance (a clock out of step, or a signature minted to be replayed later)",
			t.UTC().Format(time.RFC3339), t.Sub(now).Round(time.Second), instantName(now), tolerance)
	case errors.Is(err, webhook.ErrMissingHeader):
		return "the signature is empty"
	}
	return err.Error()
}

func instantName(now time.Time) string {
	return "the time checked against (" + now.UTC().Format(time.RFC3339) + ")"
}

// signedAt reads the t= of a signature header that parsed, for messages.
func signedAt(header string) time.Time {
	for part := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}

func parseInstant(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0), nil
	}
	return time.Parse(time.RFC3339, s)
}

// readBody reads the raw body from file, or from stdin when file is "" or "-".
func readBody(e env, file string) ([]byte, string, error) {
	var r io.Reader = e.stdin
	from := "stdin"
	if file != "" && file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, "", usagef("--body: %v", err)
		}
		defer fh.Close()
		r, from = fh, file
	}
	body, err := io.ReadAll(io.LimitReader(r, maxVerifyBody+1))
	if err != nil {
		return nil, "", usagef("reading the body from %s: %v", from, err)
	}
	if len(body) > maxVerifyBody {
		return nil, "", usagef("the body in %s is over %d bytes: no delivery is that large", from, maxVerifyBody)
	}
	return body, from, nil
}
