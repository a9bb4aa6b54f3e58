// Package benchmarks measures the library side by side with the Go libraries a user would pick
// instead, on identical inputs in one run. It is its own module so that the core never requires them;
// it has no exported API, only benchmarks, the tests that keep them honest, and the report generator.
//
// The families, each named Benchmark<Family>/<case…>/<implementation>:
//
//   - BenchmarkWebhookVerify and BenchmarkWebhookSign, 1 KiB and 64 KiB bodies: ours (webhook.Verifier,
//     webhook.Sign), the raw HMAC-SHA256 of the same bytes as the limit, stripe-go, the Standard
//     Webhooks library, Svix and go-github (verify only).
//   - BenchmarkIdempotency, first execution and replay, 256 B and 64 KiB bodies, serial and parallel:
//     ours on the memory store and a bare net/http handler; Fiber v3's idempotency middleware and a
//     bare Fiber handler. Each middleware is judged by its ratio over its own bare handler.
//   - BenchmarkProblemWrite: one 400 with two violations, ours, huma's and moogar0880/problems'.
//   - BenchmarkStore: idempotency/storetest.RunBenchmarks on the memory store, Redis and PostgreSQL
//     (the last two skip when SVC_TEST_REDIS_URL / SVC_TEST_POSTGRES_DSN are unset).
//   - BenchmarkPGThroughput, on the real PostgreSQL server: orders/s through the reference order
//     server's transactional outbox against pgbench -N at the same client count, and webhook events
//     appended and delivered per second (pgstore.EventLog, producer.Dispatcher) against Watermill's
//     SQL publisher and subscriber. Sized by SVC_BENCH_* variables (see pgthroughput_test.go); skips
//     without SVC_TEST_POSTGRES_DSN, and without pgbench unless CI=true.
//   - BenchmarkPGOutbox, the same way: one busy licensee's orders through the transactional outbox on
//     the library path, with 1 and 8 endpoints, events numbered after the commit (with the
//     commit-to-numbered lag) and, for comparison, inside the order's transaction, against pgbench -N.
//   - BenchmarkScaleFlow, BenchmarkScaleClaim and BenchmarkScaleChurn (issue 37), the event log at
//     scale through its public API only: delivered/s against appended/s with 1, 100 and 10,000
//     endpoints (order checked, WAL per event), a dispatcher's claim against a due backlog of up to
//     SVC_BENCH_SCALE_EVENTS, the sequencer's pick and the claim after that many events went through,
//     and the retention's removal of them batch by batch, without VACUUM. Sized by SVC_BENCH_SCALE_*
//     (see scale_test.go); skips without SVC_TEST_POSTGRES_DSN.
//
// The tests beside them check that every library really does its work on the prepared inputs (each
// verifier accepts its delivery and rejects a changed body; each middleware replays instead of
// running the handler), and that stripe-go and our webhook package accept each other's signatures.
//
// The report, docs/BENCHMARKS.md, is written by cmd/benchreport from a run of these benchmarks:
//
//	cd benchmarks && go run ./cmd/benchreport
//
// The scale benchmarks at full size (a million events) run on their own, and their section of the
// report is replaced alone:
//
//	cd benchmarks && go run ./cmd/benchreport -scale
//
// CI runs every benchmark once (-benchtime 1x), so none of them rots.
package benchmarks
