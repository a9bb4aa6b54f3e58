// Command consumer is the reference webhook consumer for the order server. It verifies every
// delivery's X-SVC-Signature, tracks X-SVC-Sequence, fetches any gap through range retrieval before
// going on, keeps its cursor in memory or in PostgreSQL (SVC_POSTGRES_DSN), and logs each processed
// event once.
//
//	SVC_WEBHOOK_SECRET=whsec_… SVC_API_KEY=sk_sandbox_… \
//	    go run ./examples/consumer -addr 127.0.0.1:9090 -endpoint we_… -base-url http://127.0.0.1:8080
//
// The signing secret and the API key are read from the environment (SVC_WEBHOOK_SECRET, SVC_API_KEY)
// or from files (-secret-file, -api-key-file), and the PostgreSQL DSN, which may hold a password, from
// SVC_POSTGRES_DSN; never from flags: a command line is visible to every user of the machine in ps. -api-version is the version the API key's licensee is pinned to (v1 by
// default): missed events are fetched under it.
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
	"strings"
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

// Environment variables that carry the consumer's secrets.
const (
	EnvSecret   = "SVC_WEBHOOK_SECRET"
	EnvAPIKey   = "SVC_API_KEY"
	EnvPostgres = "SVC_POSTGRES_DSN" // keep the cursor (and the processed events) in PostgreSQL
)

func run(args []string, stdout, stderr io.Writer) error {
	return runEnv(args, os.Getenv, stdout, stderr)
}

func runEnv(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9090", "address to receive deliveries on (port 0 picks a free one)")
	secretFile := fs.String("secret-file", "", "file holding the endpoint's signing secret, whsec_… (or set "+EnvSecret+")")
	apiKeyFile := fs.String("api-key-file", "", "file holding the API key for range retrieval, sk_sandbox_… (or set "+EnvAPIKey+")")
	baseURL := fs.String("base-url", "http://127.0.0.1:8080", "the order server, for range retrieval")
	endpoint := fs.String("endpoint", "", "the webhook endpoint ID, we_… (required)")
	apiVersion := fs.String("api-version", "v1", "the API version the key's licensee is pinned to: missed events are fetched under it")
	catchUp := fs.Duration("catch-up", consumer.DefaultCatchUpInterval, "how often to ask for events after the cursor (0: never)")
	if err := refuseSecretFlags(args); err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret, err := readSecret("the signing secret", EnvSecret, *secretFile, getenv, stderr)
	if err != nil {
		return err
	}
	apiKey, err := readSecret("the API key", EnvAPIKey, *apiKeyFile, getenv, stderr)
	if err != nil {
		return err
	}
	if *endpoint == "" {
		fs.Usage()
		return errors.New("-endpoint is required")
	}
	if *catchUp == 0 {
		*catchUp = -1
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := consumer.Config{EndpointID: *endpoint, Secret: secret, BaseURL: *baseURL, APIKey: apiKey,
		APIVersion: *apiVersion, CatchUpInterval: *catchUp, Logger: logger}
	if dsn := getenv(EnvPostgres); dsn != "" {
		closeDB, err := usePostgres(ctx, dsn, &cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvPostgres, err)
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

// refuseSecretFlags fails on the flags that used to carry the secrets, with the way to pass them now.
func refuseSecretFlags(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		switch name {
		case "secret", "api-key":
			return fmt.Errorf("-%s is no longer accepted: a command line is visible to every user of the machine (ps); "+
				"set %s or %s, or pass -secret-file and -api-key-file", name, EnvSecret, EnvAPIKey)
		case "postgres":
			return fmt.Errorf("-postgres is no longer accepted: a DSN may hold a password, and a command line is "+
				"visible to every user of the machine (ps); set %s", EnvPostgres)
		}
	}
	return nil
}

// readSecret reads a secret from file when one is named, else from the environment variable env. A
// file's surrounding whitespace (a trailing newline) is dropped; a file others may read gets a
// warning, since the secret is then not much safer than on the command line.
func readSecret(what, env, file string, getenv func(string) string, stderr io.Writer) (string, error) {
	if file != "" {
		info, err := os.Stat(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "warning: %s is readable by other users (mode %v); chmod 600 it\n", file, info.Mode().Perm())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s: %s is empty", what, file)
		}
		return v, nil
	}
	if v := strings.TrimSpace(getenv(env)); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s is required: set %s, or name a file holding it with -%s", what, env,
		map[string]string{EnvSecret: "secret-file", EnvAPIKey: "api-key-file"}[env])
}
