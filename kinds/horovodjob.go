package kinds

import (
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs/finalizers,verbs=update

func init() {
	Register(Kind{
		Name:      "HorovodJob",
		NewObject: func() engine.Object { return &troupev1.HorovodJob{} },
		Adapter:   func(o controllers.Options) engine.Adapter { return controllers.HorovodJob{Options: o} },
		SetupWebhook: func(mgr ctrl.Manager, o webhooks.Options) error {
			return setupWebhook(mgr, &troupev1.HorovodJob{}, webhooks.HorovodJob{Options: o})
		},
		Admit:          admit(webhooks.DefaultHorovodJob, webhooks.ValidateHorovodJob),
		ValidateUpdate: validateUpdate(func(o webhooks.Options) webhooks.HorovodJob { return webhooks.HorovodJob{Options: o} }),
	})
}
