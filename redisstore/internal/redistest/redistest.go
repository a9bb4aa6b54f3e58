// Package redistest connects tests to the real Redis named by SVC_TEST_REDIS_URL, with a key prefix of
// their own that is deleted when the test ends. Tests skip when the variable is unset and fail when it
// is set but the server does not answer, so that CI (which sets it) never skips silently. Whether it
// answers is probed once per test binary, within seconds (internal/testkit/serviceprobe): a variable
// that names a dead address fails every test that needs it at once, with a message that names the
// variable and the address, instead of each test waiting out go-redis's dial retries.
//
// StartServer and StartCluster start redis-server processes of a test's own, for settings the shared
// server must not be given; they follow the same rule, failing when the variable is set and
// redis-server is not installed.
package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/internal/testkit/serviceprobe"
	"github.com/svcplatform/conventions/internal/testkit/testid"
)

// EnvURL is the variable that names the test Redis.
const EnvURL = "SVC_TEST_REDIS_URL"

// Client returns a client for the test Redis and a fresh key prefix ("t_…:"); every key under the
// prefix is deleted and the client closed when the test ends.
func Client(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		tb.Skipf("%s is not set: skipping a test that needs a real Redis", EnvURL)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("redistest: parse %s: %v", EnvURL, err)
	}
	probe := serviceprobe.Redis
	if opts.TLSConfig != nil {
		probe = nil // rediss://: the dial decides; go-redis's own PING below checks the rest
	}
	if err := serviceprobe.Check(serviceprobe.Target{Env: EnvURL, Value: url, Server: "Redis",
		Network: opts.Network, Addr: opts.Addr, Probe: probe}); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	opts.PoolSize = 64
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		tb.Fatalf("redistest: %s is set but Redis does not answer: %v", EnvURL, err)
	}
	prefix := testid.New("t_") + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var keys []string
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = client.Del(ctx, keys...).Err()
		}
		_ = client.Close()
	})
	return client, prefix
}
