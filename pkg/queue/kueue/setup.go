package kueue

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// Available reports whether the cluster serves Kueue's Workload API (kueue.x-k8s.io/v1beta2),
// that is whether Kueue's CRDs are installed. Without them the integration stays off: a job
// labelled kueue.x-k8s.io/queue-name is not suspended at creation and runs at once.
func Available(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	resources, err := dc.ServerResourcesForGroupVersion(kueuev1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", kueuev1.GroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Kind == "Workload" {
			return true, nil
		}
	}
	return false, nil
}

// Setup registers the Workload controller of the adapter's kind with the manager. The manager's
// scheme must hold Kueue's v1beta2 types.
func Setup(mgr ctrl.Manager, a engine.Adapter) error {
	gvk, err := apiutil.GVKForObject(a.NewObject(), mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("kind of adapter %T: %w", a, err)
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder("troupe-kueue"),
		clock:    clock.RealClock{},
		gvk:      gvk,
		adapter:  a,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(gvk.Kind) + "-kueue").
		For(a.NewObject()).
		Owns(&kueuev1.Workload{}).
		Complete(r)
}
