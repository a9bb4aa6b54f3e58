// Command demo is the platform in one command:
//
//	go run ./examples/demo
//
// In one process, on loopback and in memory, it starts the reference order server and a webhook
// consumer, registers the consumer's endpoint, turns on webhook faults (drops, duplicates,
// reorderings, bad signatures), and creates a few hundred orders through a client that retries with
// the same Idempotency-Key — some responses are lost on the way back, some requests are repeated on
// purpose, some are sent twice at once. It prints progress while it runs and a report at the end:
// every order created exactly once, every event processed exactly once, none lost. It exits non-zero
// if anything was lost or done twice.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	opts := defaultOptions()
	flag.IntVar(&opts.Orders, "orders", opts.Orders, "orders to create")
	flag.IntVar(&opts.Workers, "workers", opts.Workers, "clients creating orders at once")
	flag.Uint64Var(&opts.Seed, "seed", 0, "seed of the injected faults and lost responses (0: a fresh one, printed at start)")
	flag.Parse()
	if opts.Seed == 0 {
		opts.Seed = uint64(time.Now().UnixNano())
	}
	opts.Progress = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
	if !rep.OK() {
		os.Exit(1)
	}
}
