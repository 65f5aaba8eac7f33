package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The target of the shipped ServiceMonitor (config/monitoring/servicemonitor.yaml) as
// Kubernetes service discovery finds it in an install (config/install/operator.yaml): the
// Service troupe-operator-metrics of troupe-system, port metrics, container operator.
const (
	monitorNamespace = "troupe-system"
	monitorService   = "troupe-operator-metrics"
	monitorPod       = "troupe-operator-5d8f7c9b6-x2k4q"
	monitorContainer = "operator"
	monitorPort      = "metrics"
	// The scrape interval (and timeout): short, so that rate() over a few intervals has samples
	// soon, and long enough for a scrape on a loaded machine (TLS, the token's review).
	scrapeInterval = 2 * time.Second
)

// prometheusConfig is the scrape configuration that prometheus-operator generates for the
// shipped ServiceMonitor's endpoint, with Kubernetes service discovery replaced by one static
// target that carries the meta labels discovery would give it (the operator runs on this
// machine, not in a pod): the same relabelings turn them into the target labels namespace,
// service, pod, container, endpoint and job (instance is the target's address), and
// honor_labels is false, as a ServiceMonitor leaves it. Scheme, TLS and token are the
// endpoint's (https, the certificate not verified, a bearer token from a file), as the
// ServiceMonitor says.
func prometheusConfig(target, scheme, tokenFile string) string {
	auth := ""
	if tokenFile != "" {
		auth = fmt.Sprintf(`
  authorization:
    type: Bearer
    credentials_file: %s
  tls_config:
    insecure_skip_verify: true`, tokenFile)
	}
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
- job_name: serviceMonitor/%[2]s/troupe-operator/0
  honor_labels: false
  metrics_path: /metrics
  scheme: %[3]s%[4]s
  static_configs:
  - targets: [%[5]q]
    labels:
      __meta_kubernetes_namespace: %[2]s
      __meta_kubernetes_service_name: %[6]s
      __meta_kubernetes_pod_name: %[7]s
      __meta_kubernetes_pod_container_name: %[8]s
      __meta_kubernetes_endpointslice_port_name: %[9]s
  relabel_configs:
  - {source_labels: [__meta_kubernetes_endpointslice_port_name], regex: %[9]s, action: keep}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_service_name], target_label: service}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
  - {source_labels: [__meta_kubernetes_service_name], target_label: job}
  - {target_label: endpoint, replacement: %[9]s}
`, scrapeInterval, monitorNamespace, scheme, auth, target, monitorService, monitorPod, monitorContainer, monitorPort)
}

// prometheus is a Prometheus server (hack/controlplane/build.sh prometheus, on the PATH that
// make test-e2e sets) scraping the operator: the base URL of its HTTP API, and its target's
// address (the operator's metrics endpoint).
type prometheus struct{ api, target string }

// startPrometheus runs Prometheus with prometheusConfig against the suite's operator, until the
// test ends.
func startPrometheus(t *testing.T) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not on PATH (make test-e2e builds it: hack/controlplane/build.sh prometheus): %v", err)
	}
	u, err := url.Parse(operator.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := ""
	if operator.MetricsToken != "" {
		tokenFile = filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(operator.MetricsToken), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(prometheusConfig(u.Host, u.Scheme, tokenFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", log)
			}
		}
	})
	p := &prometheus{api: "http://" + listen + "/api/v1/", target: u.Host}
	// Up once it has scraped the operator: the target's up series is 1.
	eventually(t, "Prometheus scrapes the operator", func(context.Context) (bool, error) {
		up, err := p.query(`up{job="` + monitorService + `"}`)
		if err != nil {
			return false, err
		}
		if len(up) != 1 || up[0].Value != "1" {
			var targets struct {
				ActiveTargets []struct {
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			}
			_ = p.get("targets", &targets)
			return false, fmt.Errorf("up = %v, targets %+v", up, targets.ActiveTargets)
		}
		return true, nil
	})
	return p
}

// sample is one series of a query's answer.
type sample struct {
	Labels map[string]string
	Value  string
}

// query evaluates an instant PromQL query now.
func (p *prometheus) query(q string) ([]sample, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.get("query?"+url.Values{"query": {q}}.Encode(), &data); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, want a vector", q, data.ResultType)
	}
	var out []sample
	for _, r := range data.Result {
		var s struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, err
		}
		out = append(out, sample{Labels: s.Metric, Value: fmt.Sprint(s.Value[1])})
	}
	return out, nil
}

// labelValues is what Grafana's label_values(selector, label) asks of Prometheus.
func (p *prometheus) labelValues(selector, label string) ([]string, error) {
	var values []string
	err := p.get("label/"+label+"/values?"+url.Values{"match[]": {selector}}.Encode(), &values)
	return values, err
}

// get calls the API and decodes its data.
func (p *prometheus) get(path string, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.api+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// grafanaVariable is a dashboard variable in a query: $name, ${name} or [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]`)

// dashboardLabelValues reads Grafana's label_values(selector, label).
var dashboardLabelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*(\w+)\s*\)\s*$`)

// checkDashboardOnPrometheus runs every query of the shipped Grafana dashboard on Prometheus,
// with the dashboard's variables set as a user looking at namespace ns would set them (every
// kind, that namespace, Grafana's smallest $__rate_interval for the scrape interval), until
// each answers with at least one series: a query that selects a label the scrape renamed
// answers nothing, and its panel is empty. Then every answer of a query that keeps the job's
// namespace names ns in job_namespace, the namespace variable offers ns, and no series of the
// operator's scrape has a label Prometheus renamed to exported_*.
func checkDashboardOnPrometheus(t *testing.T, p *prometheus, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := testutil.DashboardQueries(data)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"kind": ".*", "namespace": ns,
		// max(4 × scrape interval, $__interval + scrape interval), Grafana's rule.
		"__rate_interval": (4 * scrapeInterval).String(),
		"__interval":      scrapeInterval.String(),
		"__range":         "1h",
	}
	substitute := func(expr string) (string, error) {
		var missing error
		out := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
			name := strings.Trim(v, "${}[]")
			value, ok := vars[name]
			if !ok {
				missing = fmt.Errorf("variable %s has no value in the test", v)
			}
			return value
		})
		return out, missing
	}

	exprs := map[string]string{}
	for _, q := range queries {
		if exprs[q.Where], err = substitute(q.Expr); err != nil {
			t.Fatalf("%s: %v", q.Where, err)
		}
	}
	answers := map[string][]sample{}
	eventually(t, "every dashboard query answers on Prometheus", func(context.Context) (bool, error) {
		for _, q := range queries {
			expr := exprs[q.Where]
			if m := dashboardLabelValues.FindStringSubmatch(expr); m != nil {
				values, err := p.labelValues(m[1], m[2])
				if err != nil {
					return false, fmt.Errorf("%s: %w", q.Where, err)
				}
				if len(values) == 0 {
					return false, fmt.Errorf("%s offers no value: %s", q.Where, expr)
				}
				answers[q.Where] = nil
				for _, v := range values {
					answers[q.Where] = append(answers[q.Where], sample{Labels: map[string]string{m[2]: v}})
				}
				continue
			}
			got, err := p.query(expr)
			if err != nil {
				return false, fmt.Errorf("%s: %w", q.Where, err)
			}
			if len(got) == 0 {
				return false, fmt.Errorf("%s answers nothing: %s", q.Where, expr)
			}
			answers[q.Where] = got
		}
		return true, nil
	})

	for _, q := range queries {
		for _, s := range answers[q.Where] {
			if v, ok := s.Labels["job_namespace"]; ok && v != ns && !strings.Contains(q.Where, "variable") {
				t.Errorf("%s answers job_namespace=%q, want %q (the $namespace picked): %v", q.Where, v, ns, s.Labels)
			}
			for l := range s.Labels {
				if strings.HasPrefix(l, "exported_") {
					t.Errorf("%s answers a renamed label %s: %v", q.Where, l, s.Labels)
				}
			}
		}
		t.Logf("%s: %v", q.Where, answers[q.Where])
	}
	if !offers(answers, "namespace", ns) {
		t.Errorf("the dashboard's namespace variable does not offer the jobs' namespace %s", ns)
	}

	// Every series of the scrape: the target labels are the ServiceMonitor's (namespace is
	// troupe-system on every series, troupe's included), nothing is renamed exported_*, and
	// troupe's series carry the job's namespace in job_namespace.
	all, err := p.query(`{job="` + monitorService + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	jobNamespaces := map[string]bool{}
	for _, s := range all {
		for l := range s.Labels {
			if strings.HasPrefix(l, "exported_") {
				t.Errorf("Prometheus renamed a label of the operator's to %s: %v", l, s.Labels)
			}
		}
		if s.Labels["namespace"] != monitorNamespace || s.Labels["service"] != monitorService ||
			s.Labels["pod"] != monitorPod || s.Labels["container"] != monitorContainer || s.Labels["endpoint"] != monitorPort ||
			s.Labels["instance"] != p.target {
			t.Errorf("a series without the ServiceMonitor's target labels: %v", s.Labels)
		}
		if strings.HasPrefix(s.Labels["__name__"], "troupe_") && s.Labels["__name__"] != "troupe_build_info" {
			jobNamespaces[s.Labels["job_namespace"]] = true
		}
	}
	if !jobNamespaces[ns] || jobNamespaces[""] {
		t.Errorf("troupe's series carry job_namespace %v, want %s among them and on every one", keys(jobNamespaces), ns)
	}
	t.Logf("%d series scraped by Prometheus, none renamed; %d dashboard queries answered", len(all), len(queries))
}

// offers tells whether the dashboard variable name's query offered value.
func offers(answers map[string][]sample, name, value string) bool {
	for _, s := range answers["variable "+name] {
		for _, v := range s.Labels {
			if v == value {
				return true
			}
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
