package testing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (kind) (troupe_jobs_running{kind=~"$kind",job_namespace=~"$namespace"})`, []string{"troupe_jobs_running"}},
		{`histogram_quantile(0.9, sum by (le) (rate(troupe_job_startup_seconds_bucket{kind="a"}[$__rate_interval])))`,
			[]string{"troupe_job_startup_seconds_bucket"}},
		{`sum(increase(a_total{result="Failed"}[1h])) / sum(increase(a_total[1h])) > bool 0.5 and on (kind) b offset 5m`,
			[]string{"a_total", "b"}},
		{`label_values(troupe_jobs_created_total{kind=~"$kind"}, job_namespace)`, []string{"troupe_jobs_created_total"}},
		{`rate(x{l="a{b}"}[5m]) * 1e3 + up`, []string{"x", "up"}},
	} {
		if diff := cmp.Diff(tc.want, MetricNames(tc.expr)); diff != "" {
			t.Errorf("MetricNames(%s) (-want +got):\n%s", tc.expr, diff)
		}
	}
}

func TestDashboardQueries(t *testing.T) {
	got, err := DashboardQueries([]byte(`{
	  "panels": [{"title": "a", "targets": [{"refId": "A", "expr": "up"}]},
	             {"title": "row", "panels": [{"title": "b", "targets": [{"refId": "B", "expr": "x"}]}]}],
	  "templating": {"list": [{"name": "ds", "type": "datasource", "query": "prometheus"},
	                          {"name": "ns", "type": "query", "query": {"query": "label_values(y, ns)"}},
	                          {"name": "old", "type": "query", "query": "label_values(z, k)"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []DashboardQuery{
		{`panel "a" target A`, "up"}, {`panel "b" target B`, "x"},
		{"variable ns", "label_values(y, ns)"}, {"variable old", "label_values(z, k)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}
