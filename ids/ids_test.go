package ids_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ids"
)

func TestNewPrefix(t *testing.T) {
	for _, name := range []string{"ord", "evt", "we", "a", "pay2", strings.Repeat("x", ids.MaxPrefixLen)} {
		p, err := ids.NewPrefix(name)
		require.NoError(t, err, name)
		require.Equal(t, name+"_", p.String())
	}
	for _, name := range []string{"", "Ord", "ord_", "2fa", "or-d", "ördr", strings.Repeat("x", ids.MaxPrefixLen+1), "sk live"} {
		_, err := ids.NewPrefix(name)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "ids: prefix")
	}
	require.Panics(t, func() { ids.MustPrefix("Bad") })
}

func TestNewAndValid(t *testing.T) {
	orders, endpoints := ids.MustPrefix("ord"), ids.MustPrefix("we")
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				id := orders.New()
				mu.Lock()
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 4000, "no two IDs alike")
	for id := range seen {
		require.True(t, orders.Valid(id), id)
		require.False(t, endpoints.Valid(id), "an order ID is not an endpoint ID")
		require.Len(t, id, len("ord_")+ids.RandomLen)
	}
	id := orders.New()
	for _, bad := range []string{"", "ord_", id[:len(id)-1], id + "a", "ORD_" + id[4:], "ord_" + strings.Repeat("1", ids.RandomLen),
		"ord_" + strings.Repeat("A", ids.RandomLen), "sk_live_" + id[8:], "ordx" + id[4:]} {
		require.False(t, orders.Valid(bad), bad)
	}
	var zero ids.Prefix
	bare := zero.New()
	require.Len(t, bare, ids.RandomLen)
	require.True(t, zero.Valid(bare))
	require.False(t, zero.Valid(id))
}

func BenchmarkNew(b *testing.B) {
	p := ids.MustPrefix("ord")
	b.ReportAllocs()
	for b.Loop() {
		_ = p.New()
	}
}

func BenchmarkValid(b *testing.B) {
	p := ids.MustPrefix("ord")
	id := p.New()
	b.ReportAllocs()
	for b.Loop() {
		if !p.Valid(id) {
			b.Fatal(id)
		}
	}
}
