// Command consumer is the reference webhook consumer for the order server. It verifies every
// delivery's X-SVC-Signature, tracks X-SVC-Sequence, fetches any gap through range retrieval before
// going on, keeps its cursor in memory or in PostgreSQL (-postgres), and logs each processed event
// once.
//
//	go run ./examples/consumer -addr 127.0.0.1:9090 -endpoint we_… -secret whsec_… \
//	    -api-key sk_sandbox_… -base-url http://127.0.0.1:8080
//
// Register http://127.0.0.1:9090/webhooks (any path works) with POST /v1/webhook_endpoints first: the
// answer has the endpoint ID and secret this command needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/svcplatform/conventions/examples/consumer/consumer"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, which is what was asked for
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9090", "address to receive deliveries on (port 0 picks a free one)")
	secret := fs.String("secret", "", "the endpoint's signing secret, whsec_… (required)")
	apiKey := fs.String("api-key", "", "API key for range retrieval, sk_sandbox_… (required)")
	baseURL := fs.String("base-url", "http://127.0.0.1:8080", "the order server, for range retrieval")
	endpoint := fs.String("endpoint", "", "the webhook endpoint ID, we_… (required)")
	pgDSN := fs.String("postgres", "", "PostgreSQL DSN: keep the cursor (and the processed events) there, so a restart resumes where it stopped")
	catchUp := fs.Duration("catch-up", consumer.DefaultCatchUpInterval, "how often to ask for events after the cursor (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" || *apiKey == "" || *endpoint == "" {
		fs.Usage()
		return errors.New("-secret, -api-key and -endpoint are required")
	}
	if *catchUp == 0 {
		*catchUp = -1
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := consumer.Config{EndpointID: *endpoint, Secret: *secret, BaseURL: *baseURL, APIKey: *apiKey,
		CatchUpInterval: *catchUp, Logger: logger}
	if *pgDSN != "" {
		closeDB, err := usePostgres(ctx, *pgDSN, &cfg)
		if err != nil {
			return fmt.Errorf("-postgres: %w", err)
		}
		defer closeDB()
	}
	c, err := consumer.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	// Pick up whatever was missed while this consumer was down, without waiting for a delivery to
	// reveal the gap. A failure here is not fatal: the next delivery or catch-up fills it.
	catchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if n, err := c.CatchUp(catchCtx); err != nil {
		logger.Warn("initial catch-up failed", "error", err)
	} else {
		logger.Info("caught up", "events", n)
	}
	cancel()
	return c.Serve(ctx, ln)
}
