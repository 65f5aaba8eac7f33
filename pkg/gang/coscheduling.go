package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// CoschedulingGroupLabel names a pod's PodGroup for the coscheduling plugin.
const CoschedulingGroupLabel = schedv1alpha1.PodGroupLabel

// Coscheduling gangs a job with a scheduling.x-k8s.io/v1alpha1 PodGroup and a scheduler that
// runs the scheduler-plugins coscheduling plugin.
type Coscheduling struct {
	// SchedulerName is the coscheduling scheduler's name (operator flag).
	SchedulerName string
}

var _ engine.Gang = Coscheduling{}

// Objects is the job's PodGroup, named like the job.
func (c Coscheduling) Objects(s *engine.Spec) []client.Object {
	return []client.Object{&schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              MinMember(s),
			MinResources:           MinResources(s),
			ScheduleTimeoutSeconds: s.SchedulingPolicy.ScheduleTimeoutSeconds,
		},
	}}
}

// DecoratePod gives the pod to the coscheduling scheduler, in the job's PodGroup.
func (c Coscheduling) DecoratePod(s *engine.Spec, tmpl *corev1.PodTemplateSpec) {
	schedulerName(tmpl, c.SchedulerName)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[CoschedulingGroupLabel] = s.Name
}

// Restore puts the PodGroup's spec back to the job's (its minimum follows scaling).
func (Coscheduling) Restore(cur, want client.Object) bool {
	c, w := cur.(*schedv1alpha1.PodGroup), want.(*schedv1alpha1.PodGroup)
	if equality.Semantic.DeepEqual(c.Spec, w.Spec) {
		return false
	}
	c.Spec = w.Spec
	return true
}

// Condition reads the PodGroup: admitted once minMember of the job's pods are bound (or its
// phase is Scheduling, Running or Finished); else waiting for resources.
func (Coscheduling) Condition(observed client.Object, pods []corev1.Pod) metav1.Condition {
	pg, ok := observed.(*schedv1alpha1.PodGroup)
	if !ok || pg == nil {
		return gangCondition(false, troupev1.ReasonGangPending, "the PodGroup does not exist yet")
	}
	// The PodGroup's phase is kept by scheduler-plugins' own controller, which a cluster may
	// not run; bound pods tell the same from the scheduler's side.
	if c, ok := boundWhole(pg.Name, pg.Spec.MinMember, pods); ok {
		return c
	}
	switch pg.Status.Phase {
	case schedv1alpha1.PodGroupScheduling, schedv1alpha1.PodGroupRunning, schedv1alpha1.PodGroupFinished:
		return gangCondition(true, troupev1.ReasonGangScheduled,
			fmt.Sprintf("the coscheduling scheduler admitted the gang: PodGroup %s is %s", pg.Name, pg.Status.Phase))
	}
	return gangCondition(false, troupev1.ReasonGangWaiting,
		fmt.Sprintf("PodGroup %s is %s: waiting for %d pods to fit together", pg.Name, phaseOr(string(pg.Status.Phase)), pg.Spec.MinMember))
}
