package kinds

import (
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs/finalizers,verbs=update

// mpiJob is the MPIJob kind (registry lists it).
var mpiJob = newKind(Kind{
	Name:    "MPIJob",
	Adapter: func(o controllers.Options) engine.Adapter { return controllers.MPIJob{Options: o} },
	SetupWebhook: func(mgr ctrl.Manager, o webhooks.Options) error {
		return setupWebhook(mgr, &troupev1.MPIJob{}, webhooks.MPIJob{Options: o})
	},
	Admit:          admit(webhooks.DefaultMPIJob, webhooks.ValidateMPIJob),
	ValidateUpdate: validateUpdate(func(o webhooks.Options) webhooks.MPIJob { return webhooks.MPIJob{Options: o} }),
}, func() *troupev1.MPIJob { return &troupev1.MPIJob{} })
