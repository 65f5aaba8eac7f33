package main

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/troupe-dev/troupe/pkg/certscope"
	"github.com/troupe-dev/troupe/webhooks"
)

// What the operator needs for itself, apart from the jobs' namespaces (docs/security.md, "Least
// privilege"). `make manifests` generates these into config/rbac/operator/role.yaml: a Role in
// the operator's namespace and a ClusterRole that names each object it may touch.
//
// Leader election: a Lease, created once (a create cannot name its object), then read and
// renewed by name; its events are core events.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=troupe-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update;patch,resourceNames=troupe-operator.troupe.dev,namespace=troupe-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=troupe-system
//
// The certificate rotator keeps the serving certificate in one Secret and the CA in the two
// webhook configurations' caBundle. Its informers list and watch by name (rotatorManager), so
// even list and watch are limited to these objects.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update;patch,resourceNames=troupe-webhook-cert,namespace=troupe-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;update;patch,resourceNames=troupe-mutating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update;patch,resourceNames=troupe-validating-webhook-configuration
//
// The metrics endpoint asks the API server who a bearer token is and whether it may get
// /metrics (pkg/metrics.ServerOptions): reviews, which read no object.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// rotatorManager is mgr as the certificate rotator should see it: its lists and watches select
// the certificate Secret and the two webhook configurations by name (package certscope).
func rotatorManager(mgr manager.Manager, secret types.NamespacedName) manager.Manager {
	return certscope.Manager(mgr, secret, webhooks.MutatingConfigurationName, webhooks.ValidatingConfigurationName)
}
