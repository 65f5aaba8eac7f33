package metrics

import (
	"crypto/tls"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/troupe-dev/troupe/pkg/tlsconfig"
)

// ServerOptions are the metrics endpoint's, at addr ("0" turns it off). Secure, it serves HTTPS
// (a self-signed certificate the endpoint makes at start; Prometheus scrapes it with
// insecureSkipVerify, as kubebuilder's scaffold has it), HTTP/1.1 and TLS 1.2 or newer
// (tlsconfig.Harden), and answers only a bearer token the API server authenticates
// (TokenReview) for a subject it authorizes to get the non-resource URL /metrics
// (SubjectAccessReview; the ClusterRole troupe-metrics-reader grants it): the metrics name every
// tenant's namespaces and job counts. The reviews go through reviewCfg's client (ReviewConfig;
// nil: the manager's) and are bounded (reviews.go). Not secure is plain HTTP for anyone, for an
// operator run outside the cluster by the local harnesses.
func ServerOptions(addr string, secure bool, reviewCfg *rest.Config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = reviewedFilter(reviewCfg)
		o.TLSOpts = []func(*tls.Config){tlsconfig.Harden}
	}
	return o
}
