package kinds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=troupe.dev,resources=pytorchjobs/finalizers,verbs=update

// pyTorchJob is the PyTorchJob kind (registry lists it).
var pyTorchJob = newKind(webhooks.PyTorchJob{},
	func(o controllers.Options) engine.Adapter { return controllers.PyTorchJob{Options: o} },
	func(s Sample) *troupev1.PyTorchJob {
		return &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}, Spec: troupev1.PyTorchJobSpec{
			PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{
				Master: &troupev1.ReplicaSpec{Template: s.masterWith(troupev1.PyTorchMainContainer), RestartPolicy: troupev1.ReplicaRestartNever},
				Worker: &troupev1.ReplicaSpec{Replicas: ptr.To(s.WorkerSets[0]), Template: s.workerWith(troupev1.PyTorchMainContainer)},
			},
			RunPolicy: s.RunPolicy, SchedulingPolicy: s.SchedulingPolicy,
		}}
	})
