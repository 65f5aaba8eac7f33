package kinds

import (
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs/finalizers,verbs=update

// pyTorchJob is the PyTorchJob kind (registry lists it).
var pyTorchJob = newKind(Kind{
	Name:    "PyTorchJob",
	Adapter: func(o controllers.Options) engine.Adapter { return controllers.PyTorchJob{Options: o} },
	SetupWebhook: func(mgr ctrl.Manager, o webhooks.Options) error {
		return setupWebhook(mgr, &troupev1.PyTorchJob{}, webhooks.PyTorchJob{Options: o})
	},
	Admit:          admit(webhooks.DefaultPyTorchJob, webhooks.ValidatePyTorchJob),
	ValidateUpdate: validateUpdate(func(o webhooks.Options) webhooks.PyTorchJob { return webhooks.PyTorchJob{Options: o} }),
}, func() *troupev1.PyTorchJob { return &troupev1.PyTorchJob{} })
