package kinds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=horovodjobs/finalizers,verbs=update

// horovodJob is the HorovodJob kind (registry lists it).
var horovodJob = newKind(webhooks.HorovodJob{},
	func(o controllers.Options) engine.Adapter { return controllers.HorovodJob{Options: o} },
	func(s Sample) *troupev1.HorovodJob {
		return &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
			Spec: troupev1.HorovodJobSpec{MPIProgramSpec: s.mpiProgram(troupev1.HorovodMainContainer)}}
	})
