package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// keyPair is a CA and a serving certificate for name it signed, made as the rotator makes them.
func keyPair(t *testing.T, name string) (caPEM []byte, serving tls.Certificate) {
	t.Helper()
	cr := &rotator.CertRotator{CAName: "ca", CAOrganization: "test", DNSName: name,
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	serving, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, serving
}

// serve serves cert over TLS on a local port until the test ends and returns host:port.
func serve(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

func configurations(mutatingCA, validatingCA []byte) []client.Object {
	return []client.Object{
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "m.troupe.dev", ClientConfig: admissionv1.WebhookClientConfig{CABundle: mutatingCA}}}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionv1.ValidatingWebhook{{Name: "v.troupe.dev", ClientConfig: admissionv1.WebhookClientConfig{CABundle: validatingCA}}}},
	}
}

// TestServingCheck: the webhooks are ready only when the served certificate verifies, for the
// name the API server dials, against the CA bundle of every webhook.
func TestServingCheck(t *testing.T) {
	const name = "troupe-webhook-service.troupe-system.svc"
	current, servingCurrent := keyPair(t, name)
	stale, servingStale := keyPair(t, name)
	_, servingOtherName := keyPair(t, "localhost")
	cases := []struct {
		desc    string
		served  tls.Certificate
		objs    []client.Object
		wantErr string
	}{
		{"the certificate of the CA in both configurations", servingCurrent, configurations(current, current), ""},
		{"a stale certificate (the previous CA's)", servingStale, configurations(current, current), "does not verify against the CA bundle of webhook"},
		{"the CA injected into one configuration only", servingCurrent, configurations(current, stale), "webhook v.troupe.dev"},
		{"no CA injected yet", servingCurrent, configurations(nil, nil), "has no CA bundle yet"},
		{"no webhook configurations", servingCurrent, nil, "read the webhook configuration"},
		{"a certificate for another name", servingOtherName, configurations(current, current), "does not verify"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(tc.objs...).Build()
			_, port, _ := net.SplitHostPort(serve(t, tc.served))
			check, err := newServingCheck(reader, ":"+port, name, "m", "v")
			if err != nil {
				t.Fatal(err)
			}
			err = check.Check(context.Background())
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Check: %v, want ready", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Check: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// /readyz answers from the verdict of the last refresh: 1,000 concurrent probes, as anyone who
// reaches the probe port can send, cost no read of the API server and no dial beyond the
// refreshes' own (one refresh reads the two webhook configurations).
func TestReadinessCostsNoReadPerProbe(t *testing.T) {
	const name = "troupe-webhook-service.troupe-system.svc"
	ca, serving := keyPair(t, name)
	reader := &countingReader{Reader: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(configurations(ca, ca)...).Build()}
	_, port, _ := net.SplitHostPort(serve(t, serving))
	check, err := newServingCheck(reader, ":"+port, name, "m", "v")
	if err != nil {
		t.Fatal(err)
	}
	check.registered.Store(true)
	var starts atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go check.Run(ctx, func(ctx context.Context) error { starts.Add(1); return ctx.Err() })

	probes := httptest.NewServer(&healthz.Handler{Checks: map[string]healthz.Checker{"webhooks": check.Checker()}})
	defer probes.Close()
	deadline := time.Now().Add(10 * time.Second)
	for check.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", check.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	getsBefore, startsBefore := reader.gets.Load(), starts.Load()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := probes.Client().Get(probes.URL)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 1,000 readiness calls failed", n)
	}
	// At most one refresh ran meanwhile (it refreshes every 10 s once ready).
	if gets, runs := reader.gets.Load()-getsBefore, starts.Load()-startsBefore; gets > 2 || runs > 1 {
		t.Errorf("1,000 readiness calls cost %d reads and %d server checks, want at most one refresh's (2 reads, 1 check)", gets, runs)
	}
}
