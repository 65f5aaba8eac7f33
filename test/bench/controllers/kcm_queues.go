package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// queueWork is, per work queue of kube-controller-manager (endpoint_slice, statefulset, job,
// ...), the seconds its workers spent on items and the items added: from its /metrics, the
// workqueue_work_duration_seconds sum and workqueue_adds_total. Read before and after a side,
// it says which of the cluster's controllers a side's objects keep busy.
type queueWork map[string]struct{ seconds, adds float64 }

// kcmMetricsURL is kube-controller-manager's /metrics on its secure port (kwokctl lets anyone
// read /metrics), from its command line; "" when there is none.
func kcmMetricsURL(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	for _, arg := range strings.Split(string(b), "\x00") {
		if port, ok := strings.CutPrefix(arg, "--secure-port="); ok {
			return "https://127.0.0.1:" + port + "/metrics"
		}
	}
	return ""
}

// scrapeMetrics reads a Prometheus text endpoint on loopback; nil when it cannot.
func scrapeMetrics(ctx context.Context, url string) map[string]*dto.MetricFamily {
	if url == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	// The simulated cluster's own self-signed serving certificate, on loopback.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return families
}

// readQueueWork reads kube-controller-manager's work queues' totals; nil when it cannot.
func readQueueWork(ctx context.Context, url string) queueWork {
	families := scrapeMetrics(ctx, url)
	if families == nil {
		return nil
	}
	work := queueWork{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			queue := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					queue = l.GetValue()
				}
			}
			w := work[queue]
			switch name {
			case "workqueue_work_duration_seconds":
				w.seconds = m.GetHistogram().GetSampleSum()
			case "workqueue_adds_total":
				w.adds = m.GetCounter().GetValue()
			default:
				continue
			}
			work[queue] = w
		}
	}
	return work
}

// busiestQueues is "queue 12.3s (4000 adds), ..." of the n queues whose workers spent the most
// time between before and after; "" when either is unknown.
func busiestQueues(before, after queueWork, n int) string {
	if before == nil || after == nil {
		return ""
	}
	type delta struct {
		queue         string
		seconds, adds float64
	}
	var ds []delta
	for q, a := range after {
		b := before[q]
		if d := (delta{q, a.seconds - b.seconds, a.adds - b.adds}); d.seconds > 0 {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(x, y delta) int { return cmp.Compare(y.seconds, x.seconds) })
	var parts []string
	for _, d := range ds[:min(n, len(ds))] {
		parts = append(parts, fmt.Sprintf("%s %.1fs (%.0f adds)", d.queue, d.seconds, d.adds))
	}
	return strings.Join(parts, ", ")
}
