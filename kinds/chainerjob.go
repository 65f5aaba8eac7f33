package kinds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=chainerjobs/finalizers,verbs=update

// chainerJob is the ChainerJob kind (registry lists it).
var chainerJob = newKind(webhooks.ChainerJob{},
	func(o controllers.Options) engine.Adapter { return controllers.ChainerJob{Options: o} },
	func(s Sample) *troupev1.ChainerJob {
		j := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}, Spec: troupev1.ChainerJobSpec{
			Backend:    troupev1.ChainerBackendMPI,
			Master:     troupev1.ChainerMaster{Template: s.masterWith(troupev1.ChainerMainContainer)},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{}, RunPolicy: s.RunPolicy, SchedulingPolicy: s.SchedulingPolicy,
		}}
		for i, n := range s.WorkerSets {
			j.Spec.WorkerSets[sampleWorkerSetName(i)] = troupev1.ChainerWorkerSet{Replicas: ptr.To(n), Template: s.workerWith(troupev1.ChainerMainContainer)}
		}
		return j
	})
