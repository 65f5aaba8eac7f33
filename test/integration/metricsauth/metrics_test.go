// Package metricsauth serves the operator's metrics endpoint as cmd/troupe-operator does
// (pkg/metrics.ServerOptions, secure) behind a real kube-apiserver, which authenticates the
// callers' tokens and authorizes them against the install's ClusterRole troupe-metrics-reader.
package metricsauth

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: clientgoscheme.Scheme, Metrics: metrics.ServerOptions(addr, true)})
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
		// controller-runtime's filter answers a token whose review failed with 500; what
		// matters is that nothing is served.
		{"a token the API server does not know", "not-a-token", 0},
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
}
