package kueue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// MinimumVersion is the oldest Kueue whose API troupe speaks: the first to serve
// kueue.x-k8s.io/v1beta2.
const MinimumVersion = "v0.15"

// Available reports whether the cluster serves Kueue's Workload API (kueue.x-k8s.io/v1beta2),
// that is whether Kueue (MinimumVersion or newer) is installed.
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

// Integration is whether the cluster serves Kueue's API, as the operator last found it. A job
// labelled kueue.x-k8s.io/queue-name is admitted by Kueue when it does, and held suspended
// while it does not (never run outside a quota it names). When Kueue is installed after the
// operator started, Integration finds its API (it polls discovery every interval, on the
// leader) and turns the integration on without a restart: each kind's controller starts
// watching Workloads, and the held jobs, which are looked at again every interval, are queued.
type Integration struct {
	cfg      *rest.Config
	interval time.Duration
	served   atomic.Bool

	mu sync.Mutex
	// whenServed are what turns the integration on in each kind's controller.
	whenServed []func() error
}

// NewIntegration discovers whether Kueue's API is served now.
func NewIntegration(cfg *rest.Config, interval time.Duration) (*Integration, error) {
	served, err := Available(cfg)
	if err != nil {
		return nil, err
	}
	i := &Integration{cfg: cfg, interval: interval}
	i.served.Store(served)
	return i, nil
}

// Served reports whether the integration is on.
func (i *Integration) Served() bool { return i.served.Load() }

// Interval is how often discovery is asked again while the integration is off.
func (i *Integration) Interval() time.Duration { return i.interval }

// onServed registers what turns the integration on in one controller.
func (i *Integration) onServed(f func() error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.whenServed = append(i.whenServed, f)
}

// NeedLeaderElection: the controllers it turns on run on the leader only.
func (i *Integration) NeedLeaderElection() bool { return true }

// Start asks discovery every interval until Kueue's API is served, then turns the integration
// on. A discovery error is logged and asked again.
func (i *Integration) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("kueue")
	if i.Served() {
		return nil
	}
	tick := time.NewTicker(i.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		served, err := Available(i.cfg)
		if err != nil {
			log.Info("asking for Kueue's API failed; asking again", "error", err.Error())
			continue
		}
		if !served {
			continue
		}
		i.mu.Lock()
		for _, f := range i.whenServed {
			if err := f(); err != nil {
				i.mu.Unlock()
				return fmt.Errorf("turn the Kueue integration on: %w", err)
			}
		}
		i.mu.Unlock()
		i.served.Store(true)
		log.Info("Kueue's Workload API is served now: jobs labelled " + troupev1.LabelQueueName + " are admitted by Kueue")
		return nil
	}
}

// Setup registers the Workload controller of the adapter's kind with the manager. The manager's
// scheme must hold Kueue's v1beta2 types. While the integration is off the controller holds
// queued jobs suspended; it watches the kind's Workloads once it is on.
func Setup(mgr ctrl.Manager, a engine.Adapter, integration *Integration) error {
	gvk, err := apiutil.GVKForObject(a.NewObject(), mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("kind of adapter %T: %w", a, err)
	}
	r := &Reconciler{
		client:      mgr.GetClient(),
		reader:      mgr.GetAPIReader(),
		recorder:    engine.LimitNotes(mgr.GetEventRecorder("troupe-kueue")),
		clock:       clock.RealClock{},
		gvk:         gvk,
		adapter:     a,
		integration: integration,
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(strings.ToLower(gvk.Kind)+"-kueue").
		For(a.NewObject(), builder.WithPredicates(queuedJobEvents))
	if integration.Served() {
		return b.Owns(&kueuev1.Workload{}).Complete(r)
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	integration.onServed(func() error {
		return c.Watch(source.Kind(mgr.GetCache(), &kueuev1.Workload{},
			handler.TypedEnqueueRequestForOwner[*kueuev1.Workload](mgr.GetScheme(), mgr.GetRESTMapper(), a.NewObject(), handler.OnlyControllerOwner())))
	})
	return nil
}

// queuedJobEvents passes the events of jobs this controller has work for: a job labelled with a
// queue, before or after the update (a label removed is seen), and every deletion (a deleted
// job's Workloads are released whatever its labels said last). Every other job's events
// (creates and each status write of a job no queue holds) woke a pass that read the job and
// found nothing to do: 3.2 of them a job at 200 jobs (docs/performance.md).
var queuedJobEvents = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return queued(e.Object) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return queued(e.ObjectOld) || queued(e.ObjectNew) },
	GenericFunc: func(e event.GenericEvent) bool { return queued(e.Object) },
}

func queued(o client.Object) bool {
	_, ok := troupev1.Queued(o.GetLabels())
	return ok
}
