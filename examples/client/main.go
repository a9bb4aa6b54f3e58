// Command client creates orders on the reference order server through idempotency.Transport, the
// client half of the Idempotency-Key protocol: every POST gets a key, and a request whose outcome is
// unknown — the connection broke, the server answered 409 or 5xx — is sent again with the same key
// and the same body, so the server creates the order at most once and replays its answer.
//
//	go run ./examples/client -base-url http://127.0.0.1:8080 -api-key sk_sandbox_… -orders 3
//
// To make the retries visible, -lose drops that share of responses after the server has answered
// (as a flaky network would); every attempt is printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/examples/internal/apiclient"
	"github.com/svcplatform/conventions/idempotency"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, which is what was asked for
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("base-url", "http://127.0.0.1:8080", "the order server")
	apiKey := fs.String("api-key", "", "API key, sk_sandbox_… (required)")
	account := fs.String("account", "acc_demo", "account of the orders")
	side := fs.String("side", "buy", "buy or sell")
	orders := fs.Int("orders", 3, "orders to create")
	lose := fs.Float64("lose", 0.3, "share of responses lost on the way back, to show retries (0 to 1)")
	seed := fs.Uint64("seed", 0, "seed of the lost responses (0: a fresh one each run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *apiKey == "" {
		fs.Usage()
		return errors.New("-api-key is required")
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The whole lesson is this client: the idempotency.Transport sits in the http.Client, under the
	// application's own code, which never deals with keys or retries.
	httpClient := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &idempotency.Transport{
			Base: &lossyLink{base: http.DefaultTransport, lose: *lose, out: stdout,
				rng: rand.New(rand.NewPCG(*seed, *seed))},
			MinBackoff:  100 * time.Millisecond,
			MaxAttempts: 8,
		},
	}
	api := &apiclient.Client{BaseURL: *baseURL, APIKey: *apiKey, HTTP: httpClient}

	var last apiclient.Order
	var lastKey string
	for i := 1; i <= *orders; i++ {
		// One key per logical order, chosen before the first attempt: every retry of this order,
		// by the transport or by this program after a restart, must reuse it.
		key := idempotency.NewKey()
		o, res, err := api.CreateOrder(ctx, key, *account, *side)
		if err != nil {
			return describe(err)
		}
		how := "created"
		if res.Replayed {
			how = "created (the answer is a replay: an earlier attempt had already created it)"
		}
		fmt.Fprintf(stdout, "order %d: %s %s %s, key %s — %s\n", i, o.ID, o.Side, o.Account, key, how)
		last, lastKey = o, key
	}
	if *orders == 0 {
		return nil
	}

	// Sending the same request again with the same key is always safe: the server replays.
	again, res, err := api.CreateOrder(ctx, lastKey, *account, *side)
	if err != nil {
		return describe(err)
	}
	fmt.Fprintf(stdout, "same key again: %s, replayed=%v (same order: %v)\n", again.ID, res.Replayed, again.ID == last.ID)

	// Reusing a key for a different request is a client bug, and the server says so.
	other := "sell"
	if *side == "sell" {
		other = "buy"
	}
	_, _, err = api.CreateOrder(ctx, lastKey, *account, other)
	var p *apierror.Error
	if errors.As(err, &p) {
		fmt.Fprintf(stdout, "same key, different body: %d %s — %s\n", p.Status, p.Code, p.Detail)
		return nil
	}
	return fmt.Errorf("expected 422 idempotency_key_reused, got %v", err)
}

// describe turns a problem into a readable error.
func describe(err error) error {
	var p *apierror.Error
	if errors.As(err, &p) {
		return fmt.Errorf("%d %s: %s (request %s)", p.Status, p.Code, p.Detail, p.RequestID)
	}
	return err
}

// lossyLink loses a share of order responses after the server has answered, and prints every attempt.
type lossyLink struct {
	base http.RoundTripper
	lose float64
	out  io.Writer
	mu   sync.Mutex
	rng  *rand.Rand
}

func (l *lossyLink) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get(idempotency.HeaderKey)
	resp, err := l.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng.Float64() < l.lose {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		fmt.Fprintf(l.out, "  attempt with key %s: the server answered %d, but the response was lost on the way back\n", key, resp.StatusCode)
		return nil, errors.New("connection reset (simulated)")
	}
	fmt.Fprintf(l.out, "  attempt with key %s: %d%s\n", key, resp.StatusCode, replayNote(resp))
	return resp, nil
}

func replayNote(resp *http.Response) string {
	if resp.Header.Get(idempotency.HeaderReplayed) == "true" {
		return ", Idempotent-Replayed: true"
	}
	return ""
}
