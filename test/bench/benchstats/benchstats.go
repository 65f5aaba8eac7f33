// Package benchstats holds the arithmetic the bench programs share over repeated runs.
package benchstats

import "slices"

// Spread is the median of values (of an even count, the mean of the middle two) and their
// range; zeros for none. values is left as it was.
func Spread(values []float64) (median, lo, hi float64) {
	if len(values) == 0 {
		return 0, 0, 0
	}
	v := slices.Sorted(slices.Values(values))
	median = v[len(v)/2]
	if len(v)%2 == 0 {
		median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return median, v[0], v[len(v)-1]
}
