package kinds

import (
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs/finalizers,verbs=update

// chainerJob is the ChainerJob kind (registry lists it).
var chainerJob = newKind(Kind{
	Name:    "ChainerJob",
	Adapter: func(o controllers.Options) engine.Adapter { return controllers.ChainerJob{Options: o} },
	SetupWebhook: func(mgr ctrl.Manager, o webhooks.Options) error {
		return setupWebhook(mgr, &troupev1.ChainerJob{}, webhooks.ChainerJob{Options: o})
	},
	Admit:          admit(webhooks.DefaultChainerJob, webhooks.ValidateChainerJob),
	ValidateUpdate: validateUpdate(func(o webhooks.Options) webhooks.ChainerJob { return webhooks.ChainerJob{Options: o} }),
}, func() *troupev1.ChainerJob { return &troupev1.ChainerJob{} })
