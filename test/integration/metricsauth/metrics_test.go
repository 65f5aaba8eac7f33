// Package metricsauth serves the operator's metrics endpoint as cmd/troupe-operator does
// (pkg/metrics.ServerOptions, secure) behind a real kube-apiserver, which authenticates the
// callers' tokens and authorizes them against the install's ClusterRole troupe-metrics-reader.
package metricsauth

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/troupe-dev/troupe/pkg/metrics"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

func TestMetricsNeedAReaderToken(t *testing.T) {
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The install's reader role, bound to one ServiceAccount; another has no binding.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "rbac", "operator", "metrics_reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reader := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, reader); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, stranger := token("prometheus"), token("stranger")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-troupe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The endpoint, on a free port of loopback.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	// The operator's one bucket for every request of its jobs (cmd/troupe-operator's
	// limitRequests), here a small one on the manager's config; the reviews have their own.
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(50, 50)
	var reviewsInJobsBudget atomic.Int64
	mgrCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/tokenreviews") || strings.HasSuffix(req.URL.Path, "/subjectaccessreviews") {
				reviewsInJobsBudget.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{Scheme: clientgoscheme.Scheme, Metrics: metrics.ServerOptions(addr, true, metrics.ReviewConfig(cfg))})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	defer func() { cancel(); <-stopped }()

	// Prometheus's scrape: the endpoint's self-signed certificate is not verified, as the
	// ServiceMonitor says (insecureSkipVerify); HTTP/2 is offered and must not be spoken.
	tlsConfig := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}} //nolint:gosec // a self-signed test endpoint
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	// scrape returns the answer's status and protocol.
	scrape := func(ctx context.Context, bearer string) (status, proto string, code, major int, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return "", "", 0, 0, err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", "", 0, 0, err
		}
		_ = resp.Body.Close()
		return resp.Status, resp.Proto, resp.StatusCode, resp.ProtoMajor, nil
	}
	testutil.Eventually(t, "the metrics endpoint serves", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, _, _, _, err := scrape(ctx, "")
		return err == nil, nil
	})
	for _, c := range []struct {
		who, bearer string
		want        int
	}{
		{"the reader's token", prometheus, http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"a token not bound to the reader role", stranger, http.StatusForbidden},
		// A token that is no JWT is refused before any review.
		{"a token that is no JWT", "not-a-token", http.StatusUnauthorized},
		// controller-runtime's filter answers a token whose review failed with 500; what
		// matters is that nothing is served.
		{"a JWT the API server does not know", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2JvZHkifQ.c2ln", 0},
	} {
		status, proto, code, major, err := scrape(ctx, c.bearer)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.who, err)
		case c.want == 0 && code < 400:
			t.Errorf("%s: %s, want a refusal", c.who, status)
		case c.want != 0 && code != c.want:
			t.Errorf("%s: %s, want %d", c.who, status, c.want)
		case major != 1:
			t.Errorf("%s: answered over %s, want HTTP/1.1 (HTTP/2 is off)", c.who, proto)
		default:
			t.Logf("%s: %s", c.who, status)
		}
	}

	// 1,000 scrapes at once, each with a made-up JWT (a review each, were they all let
	// through), while a job's reads go through the manager's bucket: they are not delayed.
	jobs, err := kubernetes.NewForConfig(mgrCfg)
	if err != nil {
		t.Fatal(err)
	}
	flood := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tlsConfig, MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000}}
	const scrapes = 1000
	// scrapeAll sends the scrapes at once, the i-th with bearer(i); wait returns their answers'
	// status codes (0: no answer).
	scrapeAll := func(bearer func(i int) string) (wait func() map[int]int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for i := range scrapes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code := 0
				if req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil); err == nil {
					req.Header.Set("Authorization", "Bearer "+bearer(i))
					if resp, err := flood.Do(req); err == nil {
						code = resp.StatusCode
						_ = resp.Body.Close()
					}
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}()
		}
		return func() map[int]int { wg.Wait(); return codes }
	}
	// The connections first (1,000 TLS handshakes take this 2-core machine's CPU for a moment,
	// which is not what is measured): refused before any review, they stay open for the flood.
	t.Logf("%d scrapes with tokens that are no JWT: %v", scrapes, scrapeAll(func(int) string { return "not-a-token" })())
	wait := scrapeAll(func(i int) string { return fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmbG9vZCJ9.%d", i) })
	var took []time.Duration
	for range 20 {
		start := time.Now()
		if _, err := jobs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start).Round(time.Millisecond))
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("reads: %v", took)
	codes := wait()
	t.Logf("%d scrapes with made-up tokens answered %v (0: no answer)", scrapes, codes)
	if codes[http.StatusOK] > 0 {
		t.Errorf("%d scrapes with made-up tokens were served", codes[http.StatusOK])
	}
	if n := reviewsInJobsBudget.Load(); n > 0 {
		t.Errorf("%d reviews went through the jobs' client and its budget, want none", n)
	}
	// The median: the first reads share two cores with the 1,000 requests being answered.
	slices.Sort(took)
	if median := took[len(took)/2]; median >= 100*time.Millisecond {
		t.Errorf("the median read of the jobs' client took %v during the flood, want under 100 ms", median)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
