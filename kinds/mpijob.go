package kinds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=mpijobs/finalizers,verbs=update

// mpiJob is the MPIJob kind (registry lists it).
var mpiJob = newKind(webhooks.MPIJob{},
	func(o controllers.Options) engine.Adapter { return controllers.MPIJob{Options: o} },
	func(s Sample) *troupev1.MPIJob {
		return &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
			Spec: troupev1.MPIJobSpec{MPIProgramSpec: s.mpiProgram(troupev1.MPIWorkerContainer)}}
	})
