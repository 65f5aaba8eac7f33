// Package certscope narrows what the webhook certificate rotator (open-policy-agent's
// cert-controller) reads to the three objects it keeps, so that its RBAC can name them.
//
// cert-controller builds its own cache from the manager's rest.Config, with informers on every
// Secret of the certificate's namespace and on every webhook configuration of the cluster. RBAC
// limits a list or a watch to named objects only when the request selects metadata.name, so
// Manager hands the rotator a config that adds that field selector to its list and watch
// requests: its Role and ClusterRole then name the certificate Secret and the two webhook
// configurations, and its cache holds nothing else.
package certscope

import (
	"net/http"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Manager returns mgr as the certificate rotator should see it: the same manager, with a
// config whose list and watch requests of Secrets in the certificate's namespace and of
// mutating and validating webhook configurations select the named objects only.
func Manager(mgr manager.Manager, secret types.NamespacedName, mutating, validating string) manager.Manager {
	return configOverride{Manager: mgr, cfg: Config(mgr.GetConfig(), map[string]string{
		"/api/v1/namespaces/" + secret.Namespace + "/secrets":                   secret.Name,
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   mutating,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": validating,
	})}
}

// Config returns a copy of cfg whose GETs of the collections in byCollection (URL path to
// object name) select that object's name.
func Config(cfg *rest.Config, byCollection map[string]string) *rest.Config {
	scoped := rest.CopyConfig(cfg)
	scoped.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return nameSelector{next: rt, byCollection: byCollection}
	})
	return scoped
}

// configOverride is a manager whose GetConfig returns cfg.
type configOverride struct {
	manager.Manager
	cfg *rest.Config
}

func (m configOverride) GetConfig() *rest.Config { return m.cfg }

// nameSelector adds fieldSelector=metadata.name=<name> to lists and watches (GETs of a
// collection) of the collections it knows.
type nameSelector struct {
	next         http.RoundTripper
	byCollection map[string]string
}

func (n nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	name, ok := n.byCollection[req.URL.Path]
	if !ok || req.Method != http.MethodGet {
		return n.next.RoundTrip(req)
	}
	q := req.URL.Query()
	q.Set("fieldSelector", fields.OneTermEqualSelector("metadata.name", name).String())
	scoped := req.Clone(req.Context())
	scoped.URL.RawQuery = q.Encode()
	return n.next.RoundTrip(scoped)
}

// Cache is a cache of the certificate Secret and the two webhook configurations alone (lists and
// watches that select each by name, which the same RBAC allows), for what reads them on a timer
// beside the rotator: the operator's copy of the certificate into its directory and its
// readiness check. Read from a watch, they cost the API server nothing between changes, where a
// GET every few seconds cost every replica a request every second or two, forever, in the
// operator's client budget (docs/performance.md). The cache starts with Start, on every replica.
func Cache(mgr manager.Manager, secret types.NamespacedName, mutating, validating string) (cache.Cache, error) {
	byName := func(name string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", name) }
	return cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{secret.Namespace: {}}, Field: byName(secret.Name)},
			&admissionregistrationv1.MutatingWebhookConfiguration{}:   {Field: byName(mutating)},
			&admissionregistrationv1.ValidatingWebhookConfiguration{}: {Field: byName(validating)},
		},
	})
}
