// Command probe is built by installcheck in a module outside the repository, from the modules it
// installed, and checks the README's first service from outside: what a team's own code would see.
//
//	probe schema create|drop NAME   PostgreSQL schema for the first service (SVC_TEST_POSTGRES_DSN)
//	probe check BASE NAME           the first service at BASE, storing in schema NAME; then Redis and
//	                                OpenTelemetry through redisstore and otelconv (SVC_TEST_REDIS_URL)
//
// Each failed expectation is printed as "probe: …" and the exit status is 1.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/otelconv"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/webhook/producer"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch args := os.Args[1:]; {
	case len(args) == 3 && args[0] == "schema" && (args[1] == "create" || args[1] == "drop"):
		err = schema(ctx, args[1], args[2])
	case len(args) == 3 && args[0] == "check":
		err = errors.Join(firstService(ctx, args[1], args[2]), redisAndTelemetry(ctx))
	default:
		err = errors.New("usage: probe schema create|drop NAME | probe check BASE SCHEMA")
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "probe:", line)
		}
		os.Exit(1)
	}
}

func schema(ctx context.Context, op, name string) error {
	conn, err := pgx.Connect(ctx, os.Getenv("SVC_TEST_POSTGRES_DSN"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	q := "CREATE SCHEMA " + pgx.Identifier{name}.Sanitize()
	if op == "drop" {
		q = "DROP SCHEMA IF EXISTS " + pgx.Identifier{name}.Sanitize() + " CASCADE"
	}
	_, err = conn.Exec(ctx, q)
	return err
}

// call sends one request to the first service, as a client with a credential, and returns the
// response with its body read.
func call(ctx context.Context, method, url, key, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer sk_sandbox_installcheck")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, data, err
}

// problem reads a problem back as a client does, with apierror.Parse.
func problem(resp *http.Response, body []byte) (*apierror.Error, error) {
	r := *resp
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	return apierror.Parse(&r)
}

type order struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// firstService checks each convention of the README's first service, then that exactly the orders
// it created reached the account's webhook endpoint, once each, in order.
func firstService(ctx context.Context, base, schemaName string) error {
	cfg, err := pgxpool.ParseConfig(os.Getenv("SVC_TEST_POSTGRES_DSN"))
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schemaName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	endpoints, err := pgstore.NewEndpointStore(pool, nil)
	if err != nil {
		return err
	}
	const account = "acct_installcheck"
	ep := producer.Endpoint{ID: "we_installcheck", URL: "https://hooks.example.com/orders", Owner: account,
		Secrets: []string{"whsec_installcheck"}}
	if err := endpoints.Put(ctx, ep); err != nil {
		return fmt.Errorf("registering the account's endpoint: %w", err)
	}

	var errs []error
	expect := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	orders := base + "/v1/orders"
	body := `{"account":"` + account + `","amount":1250}`

	var created, replayed, fixed order
	resp, data, err := call(ctx, "POST", orders, "order-1", body)
	if err != nil {
		return err
	}
	expect(resp.StatusCode == 201 && json.Unmarshal(data, &created) == nil && strings.HasPrefix(created.ID, "ord_"),
		"POST /v1/orders: want 201 and an ord_ ID, got %d %s", resp.StatusCode, data)
	resp, data, err = call(ctx, "POST", orders, "order-1", body)
	if err != nil {
		return err
	}
	expect(resp.StatusCode == 201 && resp.Header.Get("Idempotent-Replayed") == "true" &&
		json.Unmarshal(data, &replayed) == nil && replayed.ID == created.ID,
		"the same key again: want the first answer replayed, got %d %q %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), data)

	resp, data, err = call(ctx, "POST", orders, "order-2", `{"account":"`+account+`","amount":"12.50"}`)
	if err != nil {
		return err
	}
	p, perr := problem(resp, data)
	expect(resp.StatusCode == 400 && perr == nil && len(p.Errors) == 1 && p.Errors[0].Pointer == "/amount",
		"a string amount: want a 400 problem located at /amount, got %d %s", resp.StatusCode, data)
	resp, data, err = call(ctx, "POST", orders, "order-2", body)
	if err != nil {
		return err
	}
	expect(resp.StatusCode == 201 && json.Unmarshal(data, &fixed) == nil && fixed.ID != "" && fixed.ID != created.ID,
		"the refused key with a fixed body: want a new order, got %d %s", resp.StatusCode, data)

	for _, c := range []struct{ method, path, key, code string }{
		{"POST", "/v1/orders", "", "idempotency_key_missing"},
		{"POST", "/v2/orders", "order-3", "version_unknown"},
		{"GET", "/v1/orders", "", "method_not_allowed"},
	} {
		resp, data, err := call(ctx, c.method, base+c.path, c.key, body)
		if err != nil {
			return err
		}
		p, perr := problem(resp, data)
		expect(perr == nil && p.Code == c.code, "%s %s: want the problem %s, got %d %s", c.method, c.path, c.code, resp.StatusCode, data)
	}

	// The dispatcher numbers events after they commit: wait for both, and no more.
	events, err := pgstore.NewEventLog(pool, nil)
	if err != nil {
		return err
	}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		evs, _, err := events.Range(ctx, ep.ID, 1, 100, 100)
		if err != nil {
			return err
		}
		got = got[:0]
		for _, ev := range evs {
			var o order
			_ = json.Unmarshal(ev.Data, &o)
			got = append(got, fmt.Sprintf("%d %s %s", ev.Sequence, ev.Type, o.ID))
		}
		if len(got) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := []string{"1 order.created " + created.ID, "2 order.created " + fixed.ID}
	expect(strings.Join(got, "\n") == strings.Join(want, "\n"), "the endpoint's events: want\n%s\ngot\n%s",
		strings.Join(want, "\n"), strings.Join(got, "\n"))
	if len(errs) == 0 {
		fmt.Printf("probe: first service: 2 orders created, 1 replayed, 4 problems as expected; the endpoint's events: %q\n", got)
	}
	return errors.Join(errs...)
}

// redisAndTelemetry runs an idempotent handler on Redis with OpenTelemetry observing it: the
// handler runs once for two requests with one key, and the metrics count both.
func redisAndTelemetry(ctx context.Context) error {
	opts, err := redis.ParseURL(os.Getenv("SVC_TEST_REDIS_URL"))
	if err != nil {
		return err
	}
	client := redis.NewClient(opts)
	defer client.Close()
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "installcheck:" + hex.EncodeToString(b[:]) + ":"
	defer func() {
		iter := client.Scan(context.Background(), 0, prefix+"*", 100).Iterator()
		for iter.Next(context.Background()) {
			client.Del(context.Background(), iter.Val())
		}
	}()
	store, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	reader := sdkmetric.NewManualReader()
	tel, err := otelconv.New(&otelconv.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		return err
	}
	idem, err := idempotency.New(&idempotency.Options{Store: store, Hooks: tel.Idempotency()})
	if err != nil {
		return err
	}
	ran := 0
	h := idem.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		apierror.WriteJSON(w, r, http.StatusCreated, map[string]int{"run": ran})
	}))
	var answers []string
	for range 2 {
		r := httptest.NewRequestWithContext(ctx, "POST", "/v1/things", strings.NewReader(`{}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_installcheck")
		r.Header.Set("Idempotency-Key", "thing-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		answers = append(answers, fmt.Sprintf("%d %s %s", w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String())))
	}
	var errs []error
	want := []string{`201  {"run":1}`, `201 true {"run":1}`}
	if ran != 1 || strings.Join(answers, "|") != strings.Join(want, "|") {
		errs = append(errs, fmt.Errorf("idempotency on Redis: want one run and %q, got %d runs and %q", want, ran, answers))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	requests := int64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "svc.idempotency.requests" {
				for _, dp := range sum.DataPoints {
					requests += dp.Value
				}
			}
		}
	}
	if requests != 2 {
		errs = append(errs, fmt.Errorf("otelconv: want svc.idempotency.requests to count 2, got %d", requests))
	}
	if len(errs) == 0 {
		fmt.Printf("probe: Redis: the handler ran once for two requests with one key; otelconv counted %d requests\n", requests)
	}
	return errors.Join(errs...)
}
