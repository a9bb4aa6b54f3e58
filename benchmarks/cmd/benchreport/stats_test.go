package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name           string
		xs             []float64
		median, lo, hi float64
	}{
		{"empty", nil, math.NaN(), math.NaN(), math.NaN()},
		{"odd", []float64{3, 1, 2}, 2, math.NaN(), math.NaN()}, // too few runs for a 95% interval
		{"five runs have no interval", []float64{5, 1, 4, 2, 3}, 3, math.NaN(), math.NaN()},
		{"six runs: min to max", []float64{6, 1, 5, 2, 4, 3}, 3.5, 1, 6},
		{"ten runs: 2nd to 9th", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5.5, 2, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.xs)
			require.Equal(t, len(tt.xs), s.N)
			eqNaN(t, tt.median, s.Median)
			eqNaN(t, tt.lo, s.Lo)
			eqNaN(t, tt.hi, s.Hi)
		})
	}
}

func TestSpread(t *testing.T) {
	s := Summarize([]float64{90, 100, 100, 100, 100, 120})
	require.InDelta(t, 0.20, s.Spread(), 1e-12)
	require.True(t, math.IsNaN(Summarize([]float64{1, 2}).Spread()))
	require.True(t, math.IsNaN(Summarize([]float64{0, 0, 0, 0, 0, 0}).Spread()))
}

func TestMannWhitney(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6}
	b := []float64{7, 8, 9, 10, 11, 12}
	tests := []struct {
		name   string
		xs, ys []float64
		p      float64
		delta  float64
	}{
		// Completely separated 6 and 6: 2 of C(12,6)=924 arrangements are as extreme.
		{"separated", a, b, 2.0 / 924, 1e-12},
		{"separated, reversed", b, a, 2.0 / 924, 1e-12},
		// Interleaved: U = 15 of 36, P(U <= 15) = 323/924, far from significant.
		{"interleaved", []float64{1, 3, 5, 7, 9, 11}, []float64{2, 4, 6, 8, 10, 12}, 646.0 / 924, 1e-12},
		// One pair out of order: U = 1, P(U <= 1) = 2/924 per side.
		{"one overlap", []float64{1, 2, 3, 4, 5, 7}, []float64{6, 8, 9, 10, 11, 12}, 4.0 / 924, 1e-12},
		{"identical values", []float64{5, 5, 5}, []float64{5, 5, 5}, 1, 0},
		{"empty", nil, a, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.InDelta(t, tt.p, MannWhitney(tt.xs, tt.ys), tt.delta)
		})
	}
	t.Run("ties use the normal approximation", func(t *testing.T) {
		p := MannWhitney([]float64{1, 1, 2, 2, 3, 3}, []float64{7, 7, 8, 8, 9, 9})
		require.Less(t, p, 0.01)
		require.Greater(t, p, 0.0)
	})
}

func TestExactUCDF(t *testing.T) {
	// n1 = n2 = 2: U takes 0,1,2,2,3,4 over the 6 arrangements.
	require.InDelta(t, 1.0/6, exactUCDF(2, 2, 0), 1e-12)
	require.InDelta(t, 2.0/6, exactUCDF(2, 2, 1), 1e-12)
	require.InDelta(t, 4.0/6, exactUCDF(2, 2, 2), 1e-12)
	require.InDelta(t, 1, exactUCDF(2, 2, 4), 1e-12)
}

func eqNaN(t *testing.T, want, got float64) {
	t.Helper()
	if math.IsNaN(want) {
		require.True(t, math.IsNaN(got), "want NaN, got %v", got)
		return
	}
	require.InDelta(t, want, got, 1e-12)
}
