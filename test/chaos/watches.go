package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

// openWatches is how many watches the API server serves now, by resource ("jobs.batch",
// "pods", "mpijobs.troupe.dev"), from its own apiserver_longrunning_requests gauge.
func (e *env) openWatches(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return watchesByResource(bytes.NewReader(raw))
}

// watchesByResource reads the WATCH requests of apiserver_longrunning_requests from a
// Prometheus text exposition, summed by resource.
func watchesByResource(r io.Reader) (map[string]int, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	f := families["apiserver_longrunning_requests"]
	if f == nil {
		return nil, fmt.Errorf("no apiserver_longrunning_requests in the API server's metrics")
	}
	open := map[string]int{}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["verb"] != "WATCH" {
			continue
		}
		resource := labels["resource"]
		if g := labels["group"]; g != "" {
			resource += "." + g
		}
		open[resource] += int(m.GetGauge().GetValue())
	}
	return open, nil
}

// watchesShort names the resources with fewer watches open now than before, "" when none.
func watchesShort(before, now map[string]int) string {
	var short []string
	for _, r := range slices.Sorted(maps.Keys(before)) {
		if now[r] < before[r] {
			short = append(short, fmt.Sprintf("%s %d of %d", r, now[r], before[r]))
		}
	}
	return strings.Join(short, ", ")
}

// waitWatchesBack waits, up to timeout, until the API server serves at least as many watches
// of every resource as before a restart: every client whose watches the restart ended (the
// operator's informers, kube-controller-manager's, the scheduler's) watches again. They come
// back each after its own back-off, seconds after the API server answers; an event a watch
// misses meanwhile reaches its client only then, so a tampering in that gap would time the
// back-off, not the operator.
func (e *env) waitWatchesBack(ctx context.Context, before map[string]int, timeout time.Duration) error {
	short := "not read yet"
	// A read that fails (the API server still starting) is tried again like a short count.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		short = e.watchesShortNow(ctx, before)
		return short == "", nil
	})
	if err != nil {
		return fmt.Errorf("watches not open again after %s (%s): %w", timeout, short, err)
	}
	return nil
}

// watchesShortNow is watchesShort against the API server's watches now, or why they could not
// be read.
func (e *env) watchesShortNow(ctx context.Context, before map[string]int) string {
	now, err := e.openWatches(ctx)
	if err != nil {
		return err.Error()
	}
	return watchesShort(before, now)
}
