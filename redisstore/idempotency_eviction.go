package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// checkNoEviction reads maxmemory-policy from every server the client writes to and returns an error
// unless each one runs with noeviction. Each server's problem is reported, not only the first, so
// that one start-up tells the operator every master to fix.
func checkNoEviction(ctx context.Context, client redis.UniversalClient) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	each := func(ctx context.Context, c *redis.Client) error {
		err := checkServerPolicy(ctx, c, c.String())
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		// Every master holds some scopes' records; replicas follow their master's deletions.
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	case *redis.Client:
		// A plain client and a Sentinel failover client, which reaches the current master.
		err = each(ctx, c)
	default:
		name := "the Redis server"
		if s, ok := client.(fmt.Stringer); ok {
			name = s.String()
		}
		err = checkServerPolicy(ctx, client, name)
	}
	if err != nil {
		return fmt.Errorf("redisstore: checking maxmemory-policy: %w", err)
	}
	return errors.Join(errs...)
}

// checkServerPolicy checks one server, named server in messages.
func checkServerPolicy(ctx context.Context, c redis.Cmdable, server string) error {
	vals, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// The server answered and said no: managed services rename or forbid CONFIG.
		return fmt.Errorf("redisstore: %s refused CONFIG GET maxmemory-policy (%w), so the store cannot "+
			"check that Redis will not evict idempotency records. Confirm with the provider that "+
			"maxmemory-policy is noeviction, then set IdempotencyStoreOptions.AllowEviction to skip the check", server, err)
	}
	if err != nil {
		return fmt.Errorf("redisstore: reading maxmemory-policy from %s: %w", server, err)
	}
	policy, ok := vals["maxmemory-policy"]
	if !ok {
		return fmt.Errorf("redisstore: %s did not report maxmemory-policy; set IdempotencyStoreOptions.AllowEviction "+
			"if you have confirmed it is noeviction", server)
	}
	if policy != "noeviction" {
		return fmt.Errorf("%w: %s runs with maxmemory-policy %s, and an evicted completed record lets a "+
			"retry run its handler again. Run CONFIG SET maxmemory-policy noeviction there (and set it "+
			"in redis.conf so that a restart keeps it), or set IdempotencyStoreOptions.AllowEviction to "+
			"accept the risk", ErrEvictionPolicy, server, policy)
	}
	return nil
}
