package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// servingCheck is the webhooks' readiness: the certificate this replica's webhook server
// presents must verify, for the name the API server dials, against the CA bundle of every
// webhook in the configurations. Until then the API server would refuse it ("x509: certificate
// signed by unknown authority"), so the replica must not be reported ready: not while the
// rotator is still injecting a new CA, nor while an old certificate is still being served.
type servingCheck struct {
	reader  client.Reader
	addr    string
	dnsName string
	mutating,
	validating string
	// registered is set once the webhooks' handlers are registered.
	registered atomic.Bool

	mu sync.Mutex
	// verified is the served certificate (DER) that last passed; it keeps the replica ready
	// through a moment when the API server cannot be read.
	verified []byte

	// verdict is the last refresh's answer (nil: ready), which /readyz serves without any I/O:
	// the probe port answers anyone, and a check that dialled and read the API server on each
	// call let concurrent callers spend the operator's API budget (docs/security.md).
	verdict atomic.Pointer[error]
}

// Refresh periods of the verdict: soon after a start, so that a new replica is ready within a
// probe period of serving; rarely once ready, since each refresh dials the webhook server (the
// webhook configurations come from a watch: certscope.Cache).
const (
	refreshUntilReady = time.Second
	refreshWhenReady  = 10 * time.Second
)

var errNotCheckedYet = errors.New("the webhooks' readiness is not checked yet")

// Ready is the last verdict, read without I/O.
func (c *servingCheck) Ready() error {
	if v := c.verdict.Load(); v != nil {
		return *v
	}
	return errNotCheckedYet
}

// Checker is the /readyz check: the last verdict.
func (c *servingCheck) Checker() healthz.Checker {
	return func(*http.Request) error { return c.Ready() }
}

// Run refreshes the verdict until ctx ends: whether the webhooks are registered, whether the
// server answers (started) and whether its certificate verifies (Check).
func (c *servingCheck) Run(ctx context.Context, started func(context.Context) error) {
	for {
		err := c.refresh(ctx, started)
		c.verdict.Store(&err)
		period := refreshUntilReady
		if err == nil {
			period = refreshWhenReady
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

func (c *servingCheck) refresh(ctx context.Context, started func(context.Context) error) error {
	// Not before registration: the first GetWebhookServer starts the server, which needs the
	// certificate files.
	if !c.registered.Load() {
		return errors.New("waiting for the webhooks' certificate")
	}
	if err := started(ctx); err != nil {
		return err
	}
	return c.Check(ctx)
}

func newServingCheck(reader client.Reader, bind, dnsName, mutating, validating string) (*servingCheck, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address: %w", err)
	}
	// The server listens on every address when the host is empty or unspecified.
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return &servingCheck{reader: reader, addr: net.JoinHostPort(host, port), dnsName: dnsName,
		mutating: mutating, validating: validating}, nil
}

// Check returns nil when the served certificate verifies against every CA bundle.
func (c *servingCheck) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	served, err := c.served(ctx)
	if err != nil {
		return err
	}
	bundles, err := c.caBundles(ctx)
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if bytes.Equal(c.verified, served[0].Raw) {
			return nil
		}
		return err
	}
	for name, bundle := range bundles {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(bundle) {
			return fmt.Errorf("webhook %s has no CA bundle yet", name)
		}
		inter := x509.NewCertPool()
		for _, c := range served[1:] {
			inter.AddCert(c)
		}
		if _, err := served[0].Verify(x509.VerifyOptions{DNSName: c.dnsName, Roots: roots, Intermediates: inter}); err != nil {
			return fmt.Errorf("the served certificate does not verify against the CA bundle of webhook %s yet: %w", name, err)
		}
	}
	c.mu.Lock()
	c.verified = served[0].Raw
	c.mu.Unlock()
	return nil
}

// served is the certificate chain the webhook server presents now.
func (c *servingCheck) served(ctx context.Context) ([]*x509.Certificate, error) {
	d := tls.Dialer{Config: &tls.Config{
		ServerName: c.dnsName,
		// Verified below against the webhook configurations' CA, not the system's roots.
		InsecureSkipVerify: true, //nolint:gosec
		MinVersion:         tls.VersionTLS12,
	}}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("dial the webhook server: %w", err)
	}
	defer func() { _ = conn.Close() }()
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, errors.New("the webhook server presented no certificate")
	}
	return chain, nil
}

// caBundles are the CA bundles of every webhook of both configurations, by webhook name.
func (c *servingCheck) caBundles(ctx context.Context) (map[string][]byte, error) {
	bundles := map[string][]byte{}
	var m admissionv1.MutatingWebhookConfiguration
	if err := c.reader.Get(ctx, types.NamespacedName{Name: c.mutating}, &m); err != nil {
		return nil, fmt.Errorf("read the webhook configuration %s: %w", c.mutating, err)
	}
	for _, w := range m.Webhooks {
		bundles[w.Name] = w.ClientConfig.CABundle
	}
	var v admissionv1.ValidatingWebhookConfiguration
	if err := c.reader.Get(ctx, types.NamespacedName{Name: c.validating}, &v); err != nil {
		return nil, fmt.Errorf("read the webhook configuration %s: %w", c.validating, err)
	}
	for _, w := range v.Webhooks {
		bundles[w.Name] = w.ClientConfig.CABundle
	}
	return bundles, nil
}
