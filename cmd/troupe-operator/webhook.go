package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/webhooks"
)

// webhookFlags configure the admission webhooks and their certificate.
type webhookFlags struct {
	disabled   bool
	bind       string
	certDir    string
	certSecret string
	dnsName    string
	writeCerts bool
	// defaultGang is the operator's --default-gang, shared with the controllers.
	defaultGang troupev1.GangProvider
}

func (f *webhookFlags) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.disabled, "disable-webhooks", false, "Serve no admission webhooks (the CRDs' own rules still apply).")
	fs.StringVar(&f.bind, "webhook-bind-address", ":9443", "host:port the admission webhooks are served on.")
	fs.StringVar(&f.certDir, "webhook-cert-dir", "/tmp/troupe-webhook-certs", "Directory the serving certificate is written to.")
	fs.StringVar(&f.certSecret, "webhook-cert-secret", "troupe-system/troupe-webhook-cert",
		"namespace/name of the Secret that keeps the webhooks' CA and serving certificate; it must exist (it may be empty).")
	fs.StringVar(&f.dnsName, "webhook-dns-name", "troupe-webhook-service.troupe-system.svc",
		"The name the API server reaches the webhooks by: the Service's DNS name, or localhost for a local operator with a URL webhook configuration.")
	fs.BoolVar(&f.writeCerts, "webhook-write-certs", false,
		"Copy the certificate Secret into --webhook-cert-dir, as the kubelet does for a mounted Secret (an operator run outside a pod).")
}

// server is the webhook server to give the manager, or nil when webhooks are disabled.
func (f *webhookFlags) server() (webhook.Server, error) {
	if f.disabled {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(f.bind)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address: port %q: %w", port, err)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: p, CertDir: f.certDir}), nil
}

// setup adds the certificate rotator and, once it has written the certificate, registers the
// webhooks; the readiness check passes only when they are served.
func (f *webhookFlags) setup(mgr ctrl.Manager) error {
	if f.disabled {
		return nil
	}
	ns, name, ok := strings.Cut(f.certSecret, "/")
	if !ok {
		return fmt.Errorf("--webhook-cert-secret %q: want namespace/name", f.certSecret)
	}
	certReady := make(chan struct{})
	if err := rotator.AddRotator(rotatorManager(mgr, types.NamespacedName{Namespace: ns, Name: name}), &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: ns, Name: name},
		CertDir:        f.certDir,
		CAName:         "troupe-webhook-ca",
		CAOrganization: "troupe",
		DNSName:        f.dnsName,
		IsReady:        certReady,
		Webhooks: []rotator.WebhookInfo{
			{Name: webhooks.MutatingConfigurationName, Type: rotator.Mutating},
			{Name: webhooks.ValidatingConfigurationName, Type: rotator.Validating},
		},
	}); err != nil {
		return fmt.Errorf("certificate rotator: %w", err)
	}
	if f.writeCerts {
		if err := mgr.Add(&certFileWriter{reader: mgr.GetAPIReader(), key: types.NamespacedName{Namespace: ns, Name: name}, dir: f.certDir}); err != nil {
			return err
		}
	}
	opts := webhooks.Options{DefaultGang: f.defaultGang}
	// Set once the webhooks are registered; a failed registration stops the manager.
	var registered atomic.Bool
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-certReady:
		case <-ctx.Done():
			return nil
		}
		if err := kinds.SetupWebhooks(mgr, opts); err != nil {
			return err
		}
		registered.Store(true)
		return nil
	})); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhooks", func(req *http.Request) error {
		if !registered.Load() {
			return fmt.Errorf("waiting for the webhooks' certificate")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	})
}
