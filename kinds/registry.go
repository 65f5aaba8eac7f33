// Package kinds is the registry of troupe's job kinds. Each kind is defined in its own file of
// this package, with everything the operator and the tests need of it: its API object, its
// adapter to the engine, its webhooks, its admission as a function (for fuzzing) and, in the
// same file, the RBAC markers of its resources. registry lists them: the operator, the webhook
// server and the test suites range over All, so adding a kind is its own files and one line of
// that list (docs/architecture.md).
//
// Listing only records a kind; nothing is started until the operator calls SetupControllers or
// SetupWebhooks on its manager.
package kinds

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// Kind is one registered job kind.
type Kind struct {
	// Name is the API kind, for example "ChainerJob".
	Name string
	// NewObject returns an empty job of the kind.
	NewObject func() engine.Object
	// Adapter is the kind's adapter to the engine, with the operator's settings.
	Adapter func(controllers.Options) engine.Adapter
	// SetupWebhook registers the kind's defaulting and validating webhooks with the manager's
	// webhook server.
	SetupWebhook func(ctrl.Manager, webhooks.Options) error
	// Admit does what the webhooks do to a new job: it defaults the job in place and returns
	// what validation refuses. The job must be of the kind.
	Admit func(engine.Object, webhooks.Options) field.ErrorList
	// ValidateUpdate does what the validating webhook does to an update of a job of the kind
	// (both defaulted): it returns the refusal, or nil.
	ValidateUpdate func(old, updated engine.Object, o webhooks.Options) error
}

// registry is every kind, sorted by name: the operator sets the kinds up, and the tests run
// them, in this order.
var registry = []Kind{chainerJob, horovodJob, mpiJob, pyTorchJob}

// Job is what every kind's API object is: a job the engine runs and one Kueue can queue (its
// pod sets, its suspend and managedBy fields). newKind requires it of a kind's object when the
// package is compiled, so no kind can lose Kueue or managedBy at run time.
type Job interface {
	engine.Object
	troupev1.QueuedJob
}

// newKind completes k with its object's constructor; k must have every other part.
func newKind[T Job](k Kind, newObject func() T) Kind {
	if k.Name == "" || k.Adapter == nil || k.SetupWebhook == nil || k.Admit == nil || k.ValidateUpdate == nil {
		panic(fmt.Sprintf("kinds: kind %q lacks a part", k.Name))
	}
	k.NewObject = func() engine.Object { return newObject() }
	return k
}

// All returns every registered kind, sorted by name.
func All() []Kind { return slices.Clone(registry) }

// SetupControllers registers the engine's reconciler of every kind with the manager, and the
// cache indexes they share.
func SetupControllers(mgr ctrl.Manager, o controllers.Options) error {
	if err := engine.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	for _, k := range registry {
		if err := controllers.Setup(mgr, k.Adapter(o), o); err != nil {
			return fmt.Errorf("set up %s: %w", k.Name, err)
		}
	}
	return nil
}

// SetupWebhooks registers every kind's defaulting and validating webhook with the manager's
// webhook server, at the paths config/webhook names.
func SetupWebhooks(mgr ctrl.Manager, o webhooks.Options) error {
	for _, k := range registry {
		if err := k.SetupWebhook(mgr, o); err != nil {
			return fmt.Errorf("set up the webhooks of %s: %w", k.Name, err)
		}
	}
	return nil
}

// webhook is what a kind's webhook type in package webhooks is: a typed defaulter and validator.
type webhook[T runtime.Object] interface {
	admission.Defaulter[T]
	admission.Validator[T]
}

// setupWebhook registers a kind's webhooks for objects of obj's type: the validating one through
// controller-runtime's builder, the defaulting one as webhooks.DefaultingHandler, which writes
// the defaults alone, at the path the builder would give it (config/webhook names it).
func setupWebhook[T runtime.Object](mgr ctrl.Manager, obj T, w webhook[T]) error {
	if err := ctrl.NewWebhookManagedBy(mgr, obj).WithValidator(w).Complete(); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return err
	}
	newObject := func() T { return obj.DeepCopyObject().(T) }
	mgr.GetWebhookServer().Register(mutatePath(gvk),
		&admission.Webhook{Handler: webhooks.DefaultingHandler(mgr.GetScheme(), newObject, w)})
	return nil
}

// mutatePath is where config/webhook's mutating webhook of a kind calls: controller-runtime's
// convention, /mutate-<group with dashes>-<version>-<kind in lower case>.
func mutatePath(gvk schema.GroupVersionKind) string {
	return "/mutate-" + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// admit turns a kind's defaulting and validation functions into a Kind's Admit.
func admit[T engine.Object](def func(T, webhooks.Options), validate func(T) field.ErrorList) func(engine.Object, webhooks.Options) field.ErrorList {
	return func(obj engine.Object, o webhooks.Options) field.ErrorList {
		job, ok := obj.(T)
		if !ok {
			return field.ErrorList{field.InternalError(nil, fmt.Errorf("expected %T, got %T", *new(T), obj))}
		}
		def(job, o)
		errs := validate(job)
		// What the validating webhook checks of a created job beyond its spec alone: the
		// operator's settings.
		if q, ok := any(job).(troupev1.QueuedJob); ok {
			errs = append(errs, o.ValidateClaimVolumeSources(q.JobRunPolicy())...)
		}
		return errs
	}
}

// validateUpdate turns a kind's webhook into a Kind's ValidateUpdate.
func validateUpdate[T engine.Object, W admission.Validator[T]](newWebhook func(webhooks.Options) W) func(old, updated engine.Object, o webhooks.Options) error {
	return func(old, updated engine.Object, o webhooks.Options) error {
		oldJob, okOld := old.(T)
		job, ok := updated.(T)
		if !okOld || !ok {
			return fmt.Errorf("expected two %T, got %T and %T", *new(T), old, updated)
		}
		_, err := newWebhook(o).ValidateUpdate(context.Background(), oldJob, job)
		return err
	}
}
