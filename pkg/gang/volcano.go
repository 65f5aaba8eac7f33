package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// VolcanoGroupAnnotation names a pod's Volcano PodGroup.
const VolcanoGroupAnnotation = volcanov1beta1.KubeGroupNameAnnotationKey

// Volcano gangs a job with a scheduling.volcano.sh/v1beta1 PodGroup and Volcano's scheduler.
type Volcano struct {
	// SchedulerName is Volcano's scheduler name (operator flag, usually "volcano").
	SchedulerName string
}

var _ engine.Gang = Volcano{}

// Objects is the job's PodGroup, named like the job.
func (v Volcano) Objects(s *engine.Spec) []client.Object {
	return []client.Object{&volcanov1beta1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: volcanov1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: volcanov1beta1.PodGroupSpec{
			MinMember:         MinMember(s),
			MinResources:      quantityPtr(MinResources(s)),
			Queue:             s.SchedulingPolicy.Queue,
			PriorityClassName: s.SchedulingPolicy.PriorityClassName,
		},
	}}
}

// DecoratePod gives the pod to Volcano's scheduler, in the job's PodGroup.
func (v Volcano) DecoratePod(s *engine.Spec, tmpl *corev1.PodTemplateSpec) {
	schedulerName(tmpl, v.SchedulerName)
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[VolcanoGroupAnnotation] = s.Name
}

// Restore puts the PodGroup's spec back to the job's (its minimum follows scaling).
func (Volcano) Restore(cur, want client.Object) bool {
	c, w := cur.(*volcanov1beta1.PodGroup), want.(*volcanov1beta1.PodGroup)
	if equality.Semantic.DeepEqual(c.Spec, w.Spec) {
		return false
	}
	c.Spec = w.Spec
	return true
}

// Condition reads the PodGroup's phase: Running (or Completed) is admitted; Pending and
// Inqueue wait for resources, with the scheduler's own words when it gave any.
func (Volcano) Condition(observed client.Object, pods []corev1.Pod) metav1.Condition {
	pg, ok := observed.(*volcanov1beta1.PodGroup)
	if !ok || pg == nil {
		return gangCondition(false, troupev1.ReasonGangPending, "the PodGroup does not exist yet")
	}
	switch pg.Status.Phase {
	case volcanov1beta1.PodGroupRunning, volcanov1beta1.PodGroupCompleted:
		return gangCondition(true, troupev1.ReasonGangScheduled,
			fmt.Sprintf("Volcano admitted the gang: PodGroup %s is %s", pg.Name, pg.Status.Phase))
	}
	if c, ok := boundWhole(pg.Name, pg.Spec.MinMember, pods); ok {
		return c
	}
	msg := fmt.Sprintf("PodGroup %s is %s: waiting for %d pods to fit together", pg.Name, phaseOr(string(pg.Status.Phase)), pg.Spec.MinMember)
	for _, c := range pg.Status.Conditions {
		if c.Type == volcanov1beta1.PodGroupUnschedulableType && c.Status == corev1.ConditionTrue && c.Message != "" {
			msg += ": " + c.Message
		}
	}
	return gangCondition(false, troupev1.ReasonGangWaiting, msg)
}

func phaseOr(p string) string {
	if p == "" {
		return "not yet seen by the scheduler"
	}
	return p
}

func gangCondition(ok bool, reason, msg string) metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: troupev1.ConditionGangScheduled, Status: st, Reason: reason, Message: msg}
}
