package main

import (
	"math"
	"slices"
)

// confidence is the level of the intervals and tests, benchstat's default.
const confidence = 0.95

// Summary is benchstat's description of a sample: its median and a confidence interval for it.
type Summary struct {
	N       int
	Median  float64
	Lo, Hi  float64 // the confidence interval of the median; NaN when N is too small for one
	Samples []float64
}

// Summarize returns the median of xs and a distribution-free confidence interval for it, from the
// order statistics: the widest [x(k), x(n+1-k)] whose coverage under Binomial(n, ½) is at least the
// confidence level. With 6 runs that interval is [min, max].
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs), Median: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if len(xs) == 0 {
		return s
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	s.Samples = sorted
	n := len(sorted)
	if n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	// k is the largest count with P(X < k) <= (1-confidence)/2 for X ~ Binomial(n, ½).
	alpha := (1 - confidence) / 2
	k := 0
	cdf := 0.0 // P(X < k)
	for j := 0; j < n; j++ {
		cdf += binomialPMF(n, j)
		if cdf > alpha {
			break
		}
		k = j + 1
	}
	if k >= 1 {
		s.Lo, s.Hi = sorted[k-1], sorted[n-k]
	}
	return s
}

// Spread is the half-width of the confidence interval relative to the median, the "± x%" benchstat
// prints; NaN when there is no interval or the median is zero.
func (s Summary) Spread() float64 {
	if math.IsNaN(s.Lo) || s.Median == 0 {
		return math.NaN()
	}
	return math.Max(s.Median-s.Lo, s.Hi-s.Median) / s.Median
}

func binomialPMF(n, k int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2)
}

// MannWhitney returns the two-sided p-value of the Mann-Whitney U test that xs and ys come from the
// same distribution, the test benchstat uses to say whether two medians differ. Without ties and
// for small samples the p-value is exact; otherwise it is the normal approximation with the tie
// correction. Empty samples give 1.
func MannWhitney(xs, ys []float64) float64 {
	n1, n2 := len(xs), len(ys)
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v     float64
		first bool
	}
	all := make([]obs, 0, n1+n2)
	for _, x := range xs {
		all = append(all, obs{x, true})
	}
	for _, y := range ys {
		all = append(all, obs{y, false})
	}
	slices.SortFunc(all, func(a, b obs) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	// Mid-ranks for ties, and the tie term of the variance.
	r1, tieTerm, ties := 0.0, 0.0, false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // ranks i+1..j averaged
		for k := i; k < j; k++ {
			if all[k].first {
				r1 += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		i = j
	}
	u1 := r1 - float64(n1*(n1+1))/2
	u := math.Min(u1, float64(n1*n2)-u1)
	if !ties && n1*n2 <= 2500 {
		return math.Min(1, 2*exactUCDF(n1, n2, u))
	}
	n := float64(n1 + n2)
	mean := float64(n1*n2) / 2
	sd := math.Sqrt(float64(n1*n2) / 12 * ((n + 1) - tieTerm/(n*(n-1))))
	if sd == 0 {
		return 1
	}
	z := (u - mean + 0.5) / sd // continuity correction towards the mean
	return math.Min(1, 2*0.5*math.Erfc(-z/math.Sqrt2))
}

// exactUCDF is P(U <= u) for sample sizes n1 and n2 without ties: the number of arrangements with
// at most u inversions over all C(n1+n2, n1), by the recurrence f(i, j, k) = f(i-1, j, k-j) +
// f(i, j-1, k).
func exactUCDF(n1, n2 int, u float64) float64 {
	maxU := n1 * n2
	// f[j][k] for the current i.
	prev := make([][]float64, n2+1)
	for j := range prev {
		prev[j] = make([]float64, maxU+1)
		prev[j][0] = 1 // i = 0: one arrangement, U = 0
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		for j := range cur {
			cur[j] = make([]float64, maxU+1)
			for k := 0; k <= maxU; k++ {
				v := 0.0
				if k-j >= 0 {
					v += prev[j][k-j]
				}
				if j > 0 {
					v += cur[j-1][k]
				}
				cur[j][k] = v
			}
		}
		prev = cur
	}
	total, below := 0.0, 0.0
	for k, c := range prev[n2] {
		total += c
		if float64(k) <= u {
			below += c
		}
	}
	return below / total
}
