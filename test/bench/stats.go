package main

import (
	"math"
	"slices"
	"time"
)

// median returns the median of xs (the mean of the middle two for an even
// count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// minMax returns the smallest and largest of xs.
func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// percentile returns the q-quantile (0..1) of sorted, nearest-rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// maxSamples bounds the latencies one measurement keeps per worker; past it
// the worker keeps every k-th sample so long runs stay representative.
const maxSamples = 200_000

// latencies collects one worker's request latencies, bounded in memory.
type latencies struct {
	xs   []time.Duration
	seen int
}

// add records d, thinning once maxSamples are held.
func (l *latencies) add(d time.Duration) {
	l.seen++
	if len(l.xs) < maxSamples {
		l.xs = append(l.xs, d)
		return
	}
	// Reservoir-style replacement keeps the sample unbiased.
	if j := int(fastrand(uint64(l.seen))); j < maxSamples {
		l.xs[j] = d
	}
}

// fastrand maps n to a pseudo-random index below n (splitmix64).
func fastrand(n uint64) uint64 {
	z := n*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E7E9
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return z % n
}

// merged returns every worker's samples in one sorted slice.
func merged(ls []*latencies) []time.Duration {
	var all []time.Duration
	for _, l := range ls {
		all = append(all, l.xs...)
	}
	slices.Sort(all)
	return all
}

// ms converts d to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// us converts d to float microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
