package testclock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(t0)
	require.Equal(t, t0, c.Now())
	c.Advance(time.Minute)
	require.Equal(t, t0.Add(time.Minute), c.Now())
	c.Set(t0)
	require.Equal(t, t0, c.Now())

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	require.Equal(t, t0.Add(800*time.Second), c.Now())
}
