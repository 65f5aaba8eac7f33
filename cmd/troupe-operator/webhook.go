package main

import (
	"context"
	"crypto/tls"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/certscope"
	"github.com/troupe-dev/troupe/pkg/tlsconfig"
	"github.com/troupe-dev/troupe/webhooks"
)

// webhookFlags configure the admission webhooks and their certificate.
type webhookFlags struct {
	disabled   bool
	bind       string
	certDir    string
	certSecret string
	dnsName    string
	// extraDNSNames are more names the certificate is made for (the progress endpoint's
	// Service of a local operator).
	extraDNSNames string
	writeCerts    bool
	// rotateCerts: the operator makes and rotates the certificate itself (cert-controller);
	// off, another issuer (cert-manager) fills the Secret and the configurations' caBundle.
	rotateCerts bool
	// defaultGang is the operator's --default-gang, shared with the controllers.
	defaultGang troupev1.GangProvider
	// allowClaimVolumeSources is the operator's --allow-claim-volume-sources, shared with the
	// controllers.
	allowClaimVolumeSources bool
	// extra are handlers served on the webhook server beside the webhooks, from when they are
	// (the progress endpoint).
	extra map[string]http.Handler
	// certReader reads the certificate Secret, certKey (the CA for the progress endpoint's
	// clients); set by setup.
	certReader atomic.Pointer[client.Reader]
	certKey    types.NamespacedName
}

func (f *webhookFlags) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.disabled, "disable-webhooks", false, "Serve no admission webhooks (the CRDs' own rules still apply).")
	fs.StringVar(&f.bind, "webhook-bind-address", ":9443", "host:port the admission webhooks are served on.")
	fs.StringVar(&f.certDir, "webhook-cert-dir", "/tmp/troupe-webhook-certs", "Directory the serving certificate is written to.")
	fs.StringVar(&f.certSecret, "webhook-cert-secret", "troupe-system/troupe-webhook-cert",
		"namespace/name of the Secret that keeps the webhooks' CA and serving certificate; it must exist (it may be empty).")
	fs.StringVar(&f.dnsName, "webhook-dns-name", "troupe-webhook-service.troupe-system.svc",
		"The name the API server reaches the webhooks by: the Service's DNS name, or localhost for a local operator with a URL webhook configuration.")
	fs.StringVar(&f.extraDNSNames, "webhook-extra-dns-names", "",
		"Comma-separated names the certificate the operator makes is also valid for: another Service the pods reach its progress endpoint by (a local operator's, hack/progress-local.sh).")
	fs.BoolVar(&f.writeCerts, "webhook-write-certs", false,
		"Copy the certificate Secret into --webhook-cert-dir, as the kubelet does for a mounted Secret but within seconds "+
			"(an operator outside a pod, or a pod whose cert dir is an emptyDir); stale files there are removed at start.")
	fs.BoolVar(&f.rotateCerts, "webhook-cert-rotation", true,
		"Make and rotate the webhooks' CA and serving certificate in --webhook-cert-secret and write the CA into the webhook configurations. "+
			"false: another issuer (cert-manager, with its CA injector) keeps both, and the operator serves the certificate it finds in --webhook-cert-dir.")
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
	return webhook.NewServer(webhook.Options{Host: host, Port: p, CertDir: f.certDir,
		TLSOpts: []func(*tls.Config){tlsconfig.Harden}}), nil
}

// setup adds the certificate rotator and, once the certificate is there, registers the
// webhooks. Both run on every replica, leader or not (as jobset and kueue wire them): only the
// reconcilers need the lease, and a Service in front of several replicas must find the webhooks
// on each. The readiness check passes only once this replica serves a certificate signed by
// the CA that the webhook configurations hold (servingcheck.go).
func (f *webhookFlags) setup(mgr ctrl.Manager) error {
	if f.disabled {
		return nil
	}
	ns, name, ok := strings.Cut(f.certSecret, "/")
	if !ok {
		return fmt.Errorf("--webhook-cert-secret %q: want namespace/name", f.certSecret)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	certObjects, err := certscope.Cache(mgr, key, webhooks.MutatingConfigurationName, webhooks.ValidatingConfigurationName)
	if err != nil {
		return fmt.Errorf("cache of the certificate Secret and webhook configurations: %w", err)
	}
	var reader client.Reader = certObjects
	f.certKey = key
	f.certReader.Store(&reader)
	if err := mgr.Add(everyReplica(certObjects.Start)); err != nil {
		return err
	}
	if f.writeCerts {
		// The files in the directory may be another cluster's (make demo after make
		// demo-down): remove them so that the rotator waits for this cluster's certificate
		// instead of reporting the stale one mounted.
		if err := removeCertFiles(f.certDir); err != nil {
			return err
		}
		if err := mgr.Add(&certFileWriter{reader: certObjects, key: key, dir: f.certDir}); err != nil {
			return err
		}
	}
	certReady := make(chan struct{})
	if !f.rotateCerts {
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			waitForCertFiles(ctx, f.certDir, certReady)
			return nil
		})); err != nil {
			return err
		}
	} else if err := rotator.AddRotator(rotatorManager(mgr, key), &rotator.CertRotator{
		SecretKey:      key,
		CertDir:        f.certDir,
		CAName:         "troupe-webhook-ca",
		CAOrganization: "troupe",
		DNSName:        f.dnsName,
		ExtraDNSNames:  nonEmpty(strings.Split(f.extraDNSNames, ",")),
		IsReady:        certReady,
		// Every replica keeps the certificate and the CA bundles current; concurrent writes
		// of the Secret are resolved by its resourceVersion (the loser rereads it).
		RequireLeaderElection: false,
		Webhooks: []rotator.WebhookInfo{
			{Name: webhooks.MutatingConfigurationName, Type: rotator.Mutating},
			{Name: webhooks.ValidatingConfigurationName, Type: rotator.Validating},
		},
	}); err != nil {
		return fmt.Errorf("certificate rotator: %w", err)
	}
	opts := webhooks.Options{DefaultGang: f.defaultGang, AllowClaimVolumeSources: f.allowClaimVolumeSources}
	check, err := newServingCheck(certObjects, f.bind, f.dnsName,
		webhooks.MutatingConfigurationName, webhooks.ValidatingConfigurationName)
	if err != nil {
		return err
	}
	// A failed registration stops the manager.
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-certReady:
		case <-ctx.Done():
			return nil
		}
		if err := kinds.SetupWebhooks(mgr, opts); err != nil {
			return err
		}
		for path, h := range f.extra {
			mgr.GetWebhookServer().Register(path, h)
		}
		check.registered.Store(true)
		return nil
	})); err != nil {
		return err
	}
	started := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil)
		if err != nil {
			return err
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		check.Run(ctx, started)
		return nil
	})); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhooks", check.Checker())
}

// nonEmpty is names without the empty ones, trimmed.
func nonEmpty(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// everyReplica is a runnable that starts on every replica, not only on the elected leader
// (a plain manager.RunnableFunc waits for the lease).
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }
