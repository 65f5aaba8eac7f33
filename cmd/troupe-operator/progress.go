package main

import (
	"context"
	"flag"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/progress"
)

// progressFlags configure the progress endpoint (docs/progress.md), served on the webhook
// server with its certificate.
type progressFlags struct {
	enabled bool
	url     string
}

func (f *progressFlags) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "progress-endpoint", true,
		"Serve the endpoint jobs' trainings report their progress to, on the webhook server, and give every pod of a job its URL, "+
			"a token for it and the CA (needs the webhooks; docs/progress.md).")
	fs.StringVar(&f.url, "progress-url", "",
		"Base URL the pods reach the progress endpoint at (default https://<--webhook-dns-name>, the webhooks' Service); its certificate is the webhooks'.")
}

// setupProgress makes the progress endpoint, served once the webhooks are (hooks.extra), and
// returns what the reconcilers need of it; nil when it is off or the webhooks are.
func setupProgress(f progressFlags, hooks *webhookFlags, mgr ctrl.Manager, reviewCfg *rest.Config) (*engine.ProgressEndpoint, error) {
	if !f.enabled || hooks.disabled {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(reviewCfg) // the reviews' own budget, not the jobs'
	if err != nil {
		return nil, err
	}
	srv := progress.NewServer(mgr.GetCache(), progress.NewReviewer(cs.AuthenticationV1().TokenReviews()), mgr.Elected(), kinds.ProgressKinds()...)
	hooks.extra = map[string]http.Handler{progress.Path: srv}
	base := f.url
	if base == "" {
		base = "https://" + hooks.dnsName
	}
	e := srv.Endpoint(strings.TrimSuffix(base, "/"), hooks.ca)
	return &e, nil
}

// ca is the CA certificate (PEM) of the webhooks' certificate Secret, as the certificate cache
// holds it; nil until the Secret has one.
func (f *webhookFlags) ca() []byte {
	r := f.certReader.Load()
	if r == nil {
		return nil
	}
	var s corev1.Secret
	if err := (*r).Get(context.Background(), f.certKey, &s); err != nil {
		return nil
	}
	return s.Data["ca.crt"]
}
