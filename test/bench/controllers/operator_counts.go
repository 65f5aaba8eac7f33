package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// labelledCounts is a counter family's values by the values of some of its labels, joined with
// spaces ("MPIJob success"), summed over the other labels.
type labelledCounts map[string]float64

// readLabelledCounts reads the counter name from a Prometheus endpoint, keyed by the values of
// labels; nil when it cannot.
func readLabelledCounts(ctx context.Context, url, name string, labels ...string) labelledCounts {
	f, ok := scrapeMetrics(ctx, url)[name]
	if !ok {
		return nil
	}
	out := labelledCounts{}
	for _, m := range f.GetMetric() {
		values := make([]string, len(labels))
		for _, l := range m.GetLabel() {
			if i := slices.Index(labels, l.GetName()); i >= 0 {
				values[i] = l.GetValue()
			}
		}
		out[strings.Join(values, " ")] += m.GetCounter().GetValue()
	}
	return out
}

// total is the counter summed over every label value.
func (c labelledCounts) total() float64 {
	sum := 0.0
	for _, v := range c {
		sum += v
	}
	return sum
}

// countsBetween is "MPIJob success 9000, MPIJob requeue_after 2100, ..." of what grew between
// before and after, largest first; "" when after is unknown. A series absent before counts from
// zero (a counter appears with its first increment).
func countsBetween(before, after labelledCounts) string {
	if after == nil {
		return ""
	}
	type grown struct {
		key string
		by  float64
	}
	var gs []grown
	for k, a := range after {
		if d := a - before[k]; d > 0 {
			gs = append(gs, grown{k, d})
		}
	}
	slices.SortFunc(gs, func(x, y grown) int {
		return cmp.Or(cmp.Compare(y.by, x.by), strings.Compare(x.key, y.key))
	})
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%s %.0f", g.key, g.by)
	}
	return strings.Join(parts, ", ")
}
