// Command orderserver is the reference order server: the platform's conventions — idempotent
// mutating requests, signed and sequenced webhooks with range retrieval, RFC 9457 problems, path
// versioning pinned per licensee, and a sandbox told apart by its keys — wired together the way a
// product team would. Everything lives in memory unless SVC_POSTGRES_DSN (and SVC_REDIS_URL) say
// otherwise.
//
//	go run ./examples/orderserver -addr 127.0.0.1:8080
//
// On start it prints the address, a sandbox API key, a production API key (to see that production keys
// cannot reach the sandbox controls) and the admin token that issues further sandbox credentials;
// -env-file FILE also writes them as shell assignments (BASE, KEY, LIVE, ADMIN), so that another
// shell can `. FILE` and run examples/README.md's curl session as written. The routes are listed in
// the server package's documentation and in examples/README.md.
//
// Secrets come from the environment, never from flags, which every user of the machine can read
// (/proc/<pid>/cmdline, ps): SVC_POSTGRES_DSN (credentials, orders, endpoints, events, pins and
// idempotency records in PostgreSQL), SVC_REDIS_URL (idempotency records in Redis) and
// SVC_ADMIN_TOKEN (or -admin-token-file FILE; neither: a fresh token). -postgres, -redis and
// -admin-token are refused with where the value goes instead.
//
//	SVC_POSTGRES_DSN="$DSN" go run ./examples/orderserver
//
// Webhook deliveries connect only to public unicast addresses, checked at dial time after DNS
// resolution, and registration refuses URLs that point elsewhere (loopback, private networks, cloud
// metadata at 169.254.169.254, local-use names such as metadata.google.internal, obfuscated IPv4
// forms). A sandbox whose consumers run on the same machine opens its guard with SVC_WEBHOOK_ALLOW:
// per environment, CIDR prefixes, IP addresses (with or without a port) and host names (with or
// without a port), such as
//
//	SVC_WEBHOOK_ALLOW="sandbox=127.0.0.0/8,::1/128,localhost" go run ./examples/orderserver
//
// Production keys' endpoints are checked against the live= group only, so they never reach what only
// the sandbox was allowed; a name reaches only the addresses its group allows; an answer from a
// destination only the allow-list admits is recorded in the delivery history by its status alone.
// A bad entry stops the server at start with an error naming it. Sandbox keys may register http
// URLs; production keys must use https. Each licensee may register 16 endpoints per environment.
//
// Every request is recorded in the request log (in PostgreSQL with SVC_POSTGRES_DSN, else in memory),
// which each licensee reads at GET /{version}/requests/{request_id} with the X-Request-Id of an
// answer; it is written at shutdown too. -version-rollback-window sets how long after an upgrade of
// its version pin a licensee may go back (72 hours by default).
//
// Stored idempotency responses and, with -postgres, webhook signing secrets are sealed (AES-256-GCM)
// with the key ring in SVC_SEAL_KEYS, which every replica must share; responses that carry a secret
// (an issued API key, a webhook signing secret) are never stored in plain text, with or without it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/seal"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, which is what was asked for
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderserver:", err)
		os.Exit(1)
	}
}

// EnvSealKeys names the environment variable with the key ring that seals stored idempotency
// records and webhook signing secrets: comma-separated "<id>:<base64 of 32 bytes>" keys, the first of
// which seals. To rotate, add a new key second to every replica's ring, then move it first: every
// start seals the stored webhook secrets again under the first key. Keep the old key in the ring for
// a day (the idempotency retention) after every replica runs with the new key first, then drop it. With a ring, a stored record that is not sealed (one stored
// before the ring was set, within the last day) or does not open is answered 500, never replayed.
const EnvSealKeys = "SVC_SEAL_KEYS"

// sealer builds the key ring from ring. Without one, nothing is sealed: stored responses that carry
// a secret (idempotency.Secret) are stored without their body, so no secret is in the idempotency
// store either way, but webhook signing secrets lie in PostgreSQL as issued.
func sealer(ring string, logger *slog.Logger) (*seal.Ring, error) {
	var keys []seal.Key
	for i, s := range strings.Split(ring, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		k, err := seal.ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", EnvSealKeys, i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		logger.Info("stored idempotency responses and webhook signing secrets are not sealed (set " + EnvSealKeys + "); responses that carry a secret are stored without their body")
		return nil, nil
	}
	return seal.NewRing(keys...)
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of orderserver:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), secretsHelp)
	}
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free one)")
	publicURL := fs.String("base-url", "", "the `URL` clients reach the server at, in issued credentials and the -env-file, when it is not http://<the address it listens on> (in a container, behind a proxy)")
	redisPrefix := fs.String("redis-prefix", "svc:", "prefix of every Redis key the server writes ($"+EnvRedisURL+" names the Redis)")
	adminTokenFile := fs.String("admin-token-file", "", "read the token that authorises POST /v1/sandbox/credentials from `file` (default: $"+EnvAdminToken+", else a fresh one)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://`addr`/metrics (port 0 picks a free one): every convention's metrics, see the otelconv module")
	otlp := fs.String("otlp", "", "send traces over OTLP/HTTP to `URL` (such as http://127.0.0.1:4318/v1/traces); the standard OTEL_EXPORTER_OTLP_* variables turn it on too")
	liveRate := fs.Float64("live-rate", server.LiveRate, "production requests a second per licensee, with -live-burst at once (the sandbox has no limit)")
	liveBurst := fs.Int("live-burst", server.LiveBurst, "production requests per licensee at once, before -live-rate applies")
	disableAfter := fs.Duration("webhook-disable-after", 0, "disable a webhook endpoint whose deliveries fail for this long without a success (0: the producer's 5 days; an evaluation may use minutes; negative: never); an endpoint answering 410 Gone is disabled at once")
	rollbackWindow := fs.Duration("version-rollback-window", 0, "how long after upgrading its version pin (POST /{version}/version_pin) a licensee may go back, once (0: 72h; negative: never, every upgrade is final at once)")
	envFile := fs.String("env-file", "", "also write what it prints at start as shell assignments (BASE, KEY, LIVE, ADMIN) to `file`, mode 0600, for '. file' in another shell")
	if err := refuseSecretFlags(args); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	sec, err := readSecrets(os.Getenv, *adminTokenFile)
	if err != nil {
		return err
	}
	if *publicURL != "" {
		if u, err := url.Parse(*publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("-base-url: want an absolute http or https URL such as http://127.0.0.1:8080, got %q", *publicURL)
		}
	}
	if !(*liveRate > 0) || math.IsInf(*liveRate, 0) {
		return fmt.Errorf("-live-rate: want requests a second above 0, got %v", *liveRate)
	}
	if *liveBurst < 1 {
		return fmt.Errorf("-live-burst: want at least 1 request, got %d", *liveBurst)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	// Logs go to stderr; stdout carries only the startup lines, so a script can read them.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// SIGINT and SIGTERM cancel ctx; Serve then shuts down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ring, err := sealer(os.Getenv(EnvSealKeys), logger)
	if err != nil {
		return err
	}
	cfg, closeBackends, err := openBackends(ctx, sec.postgresDSN, sec.redisURL, *redisPrefix, ring, logger)
	if err != nil {
		return err
	}
	cfg.Sealer = ring
	defer closeBackends()
	tel, err := openTelemetry(ctx, *metricsAddr, *otlp, logger)
	if err != nil {
		return err
	}
	defer func() {
		// After Serve: the last spans are flushed, the last scrape can still be answered until now.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.close(sctx); err != nil {
			logger.Warn("telemetry shutdown", "error", err)
		}
	}()
	cfg.Telemetry = tel.tel
	if cfg.Webhooks.SandboxGuard, cfg.Webhooks.LiveGuard, err = webhookGuards(os.Getenv(EnvWebhookAllow), logger); err != nil {
		return err
	}

	// Listen before building the server so that port 0 works: the real address goes into the base
	// URL handed out with credentials and into the first line printed.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	listening := "http://" + ln.Addr().String()
	baseURL := listening
	if *publicURL != "" {
		baseURL = strings.TrimSuffix(*publicURL, "/")
	}
	cfg.AdminToken, cfg.BaseURL, cfg.Logger = sec.adminToken, baseURL, logger
	cfg.LiveRate, cfg.LiveBurst = *liveRate, *liveBurst
	cfg.Webhooks.DisableAfter = *disableAfter
	cfg.RollbackWindow = *rollbackWindow
	srv, err := server.New(cfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	sandboxKey, err := srv.IssueCredentials(ctx, apikey.Sandbox)
	if err != nil {
		_ = ln.Close()
		return err
	}
	liveKey, err := srv.IssueCredentials(ctx, apikey.Live)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if *envFile != "" {
		// Written before the first line is printed: whoever saw that line can read the file.
		err := writeEnvFile(*envFile, [][2]string{{"BASE", baseURL}, {"KEY", sandboxKey.APIKey},
			{"LIVE", liveKey.APIKey}, {"ADMIN", srv.AdminToken()}})
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("-env-file: %w", err)
		}
	}
	fmt.Fprintf(stdout, "listening on %s\n", listening)
	fmt.Fprintf(stdout, "sandbox API key: %s\n", sandboxKey.APIKey)
	fmt.Fprintf(stdout, "live API key: %s\n", liveKey.APIKey)
	fmt.Fprintf(stdout, "admin token: %s\n", srv.AdminToken())
	if u := tel.MetricsURL(); u != "" {
		fmt.Fprintf(stdout, "metrics on %s\n", u)
	}
	logger.Info("orderserver started", "addr", listening, "base_url", baseURL, "storage", storageName(sec.postgresDSN, sec.redisURL))

	err = srv.Serve(ctx, ln)
	logger.Info("orderserver stopped")
	return err
}
