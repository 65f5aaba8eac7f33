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
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/progress"
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
	// Sample is a small job of the kind, as Sample describes it: test harnesses (the chaos
	// run, the tamperings) make jobs of every registered kind with it.
	Sample func(Sample) engine.Object
}

// registry is every kind, sorted by name: the operator sets the kinds up, and the tests run
// them, in this order.
var registry = []Kind{chainerJob, horovodJob, mpiJob, pyTorchJob}

// Job is what every kind's API object is: a job the engine runs and one its webhook admits
// (Kueue's pod sets, its suspend and managedBy fields, its defaults). newKind requires it of a
// kind's object when the package is compiled, so no kind can lose Kueue or managedBy at run
// time.
type Job interface {
	engine.Object
	webhooks.Job
}

// newKind is the kind whose object is T, admitted by its webhook type in package webhooks (an
// alias of webhooks.Webhook over the kind's rules, R, which stays unexported there) and run by
// adapter. Everything else a Kind holds is derived from those.
func newKind[T Job, R webhooks.Rules[T]](_ webhooks.Webhook[T, R], adapter func(controllers.Options) engine.Adapter, sample func(Sample) T) Kind {
	newObject := func() T { return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T) }
	return Kind{
		Name:      reflect.TypeFor[T]().Elem().Name(),
		NewObject: func() engine.Object { return newObject() },
		Adapter:   adapter,
		SetupWebhook: func(mgr ctrl.Manager, o webhooks.Options) error {
			return setupWebhook(mgr, newObject(), webhooks.Webhook[T, R]{Options: o})
		},
		Admit:          admit[T, R],
		ValidateUpdate: validateUpdate[T, R],
		Sample:         func(s Sample) engine.Object { return sample(s) },
	}
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

// ProgressKinds are the kinds as the progress endpoint takes reports of them.
func ProgressKinds() []progress.Kind {
	out := make([]progress.Kind, 0, len(registry))
	for _, k := range registry {
		out = append(out, progress.Kind{Name: k.Name, NewObject: k.NewObject})
	}
	return out
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

// admit is a Kind's Admit: what the webhooks do to a new job of type T, whose rules are R.
func admit[T Job, R webhooks.Rules[T]](obj engine.Object, o webhooks.Options) field.ErrorList {
	job, ok := obj.(T)
	if !ok {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("expected %T, got %T", *new(T), obj))}
	}
	job.SetDefaults(o.Defaults())
	var rules R
	// What the validating webhook checks of a created job beyond its spec alone: the
	// operator's settings.
	return append(rules.Validate(job), o.ValidateClaimVolumeSources(job.JobRunPolicy())...)
}

// validateUpdate is a Kind's ValidateUpdate: the validating webhook's answer to an update of a
// job of type T, whose rules are R.
func validateUpdate[T Job, R webhooks.Rules[T]](old, updated engine.Object, o webhooks.Options) error {
	oldJob, okOld := old.(T)
	job, ok := updated.(T)
	if !okOld || !ok {
		return fmt.Errorf("expected two %T, got %T and %T", *new(T), old, updated)
	}
	_, err := webhooks.Webhook[T, R]{Options: o}.ValidateUpdate(context.Background(), oldJob, job)
	return err
}
