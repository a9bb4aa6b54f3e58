package portal

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func rate(x float64) *float64 { return &x }

func TestNewSparkline(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	t.Run("no statistics", func(t *testing.T) {
		s := newSparkline(nil, now)
		require.True(t, s.Empty)
		require.Empty(t, s.Path)
		require.Equal(t, "No statistics", s.Label)
		require.Equal(t, 120, s.Width)
		require.Equal(t, 28, s.Height)
	})
	t.Run("a quiet day", func(t *testing.T) {
		s := newSparkline(make([]hourJSON, 24), now)
		require.True(t, s.Empty)
		require.Empty(t, s.Path)
		require.Empty(t, s.Dots)
		require.Equal(t, "No deliveries in the last 24 hours", s.Label)
	})
	t.Run("gaps", func(t *testing.T) {
		s := newSparkline([]hourJSON{
			{Attempts: 4, Delivered: 4, SuccessRate: rate(1)},
			{}, // no attempt: a gap
			{Attempts: 2, Delivered: 1, SuccessRate: rate(0.5)},
			{Attempts: 4, Delivered: 0, SuccessRate: rate(0)},
			{Attempts: 3, Delivered: 3}, // no rate: a gap too
			{Attempts: 1, Delivered: 1, SuccessRate: rate(1)},
		}, now)
		require.False(t, s.Empty)
		// x runs from 2 to 118 in five steps of 23.2; y from 2 (100%) to 26 (0%).
		require.Equal(t, "M2.0 2.0 M48.4 14.0 L71.6 26.0 M118.0 2.0", s.Path)
		require.Equal(t, []point{{"2.0", "2.0"}, {"48.4", "14.0"}, {"118.0", "2.0"}}, s.Dots, "a dot where each run starts")
		require.Equal(t, "Success rate over the last 24 hours, hour by hour: 6 of 11 attempts delivered", s.Label)
	})
	t.Run("one hour", func(t *testing.T) {
		s := newSparkline([]hourJSON{{Attempts: 1, Delivered: 1, SuccessRate: rate(1)}}, now)
		require.Equal(t, "M2.0 2.0", s.Path)
	})
	t.Run("in range", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for range 100 {
			hours := make([]hourJSON, 24)
			for i := range hours {
				if r.IntN(4) == 0 {
					continue
				}
				n := 1 + r.IntN(50)
				d := r.IntN(n + 1)
				hours[i] = hourJSON{Attempts: n, Delivered: d, SuccessRate: rate(float64(d) / float64(n))}
			}
			s := newSparkline(hours, now)
			require.Regexp(t, `^([ML]\d+\.\d \d+\.\d ?)*$`, s.Path, "numbers and M/L only")
			nums := regexp.MustCompile(`[ML](\d+\.\d) (\d+\.\d)`).FindAllStringSubmatch(s.Path, -1)
			for _, xy := range nums {
				x, _ := strconv.ParseFloat(xy[1], 64)
				y, _ := strconv.ParseFloat(xy[2], 64)
				require.True(t, x >= 2 && x <= 118, "x %v", x)
				require.True(t, y >= 2 && y <= 26, "y %v", y)
			}
			runs := strings.Count(s.Path, "M")
			require.Len(t, s.Dots, runs)
		}
	})
}
