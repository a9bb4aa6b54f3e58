package producer

import (
	"cmp"
	"slices"
	"sync"

	"github.com/svcplatform/conventions/webhook"
)

// signerCacheSize bounds how many endpoints' Signers a Dispatcher or RangeHandler keeps. A miss costs
// one NewSigner (about what webhook.Sign costs for one message), so the bound only needs to cover the
// endpoints that are busy at the same time.
const signerCacheSize = 1024

// signerCache keeps one webhook.Signer per endpoint so that signing a delivery or a range response
// reuses the Signer's pooled, already keyed HMAC states instead of keying a fresh HMAC per message.
//
// An entry is used only for the exact secret list it was built from: the endpoint is looked up for
// every delivery and range request, and a list that differs in any way (a rotation starting or ending,
// a replaced secret) builds a new Signer that replaces the entry, so a rotated secret takes effect on
// the next message and a retired one is not kept. When the cache is full an arbitrary entry is dropped
// (map iteration order), which keeps it bounded without bookkeeping on the hot path.
//
// The zero value is an empty cache of signerCacheSize entries; it is safe for concurrent use.
type signerCache struct {
	mu  sync.Mutex
	max int // 0: signerCacheSize
	m   map[string]cachedSigner
}

type cachedSigner struct {
	secrets []string // the cache's own copy
	signer  *webhook.Signer
}

// get returns a Signer for exactly the endpoint's secrets — those that sign now
// (Endpoint.SigningSecrets) — or webhook.ErrNoSecret when they cannot sign.
func (c *signerCache) get(id string, secrets []string) (*webhook.Signer, error) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && slices.Equal(e.secrets, secrets) {
		return e.signer, nil
	}
	s, err := webhook.NewSigner(secrets)
	if err != nil {
		return nil, err
	}
	// Two callers holding different lists for one endpoint (a rotation seen mid-pass) each sign with
	// the Signer for their own list; the entry ends up with whichever stored last.
	e = cachedSigner{secrets: slices.Clone(secrets), signer: s}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedSigner)
	}
	if _, ok := c.m[id]; !ok && len(c.m) >= cmp.Or(c.max, signerCacheSize) {
		for id := range c.m {
			delete(c.m, id)
			break
		}
	}
	c.m[id] = e
	return s, nil
}

// size returns how many Signers the cache holds.
func (c *signerCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
