package engine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Running jobs are never disturbed by the operator. Worker StatefulSets use the OnDelete
// update strategy, so a new template never rolls a pod by itself; and the engine writes a new
// template (from a spec change, or from a new operator release that injects something else)
// only while the job has no live pod, so a worker that restarts mid-run comes back as its
// peers are and not in a shape they were never started with. Until then the job says so in its
// TemplateDrift condition.

// holdTemplate keeps the current pod template (and its hash, so the change stays pending) in
// want when the engine would rewrite it while pods of the job live. It reports whether it held
// a change back. Workers being released (suspend, pause, the job's end) get the new template
// at once: none of their pods stays, and a quick resume must bring them back with it (a
// suspended job's placement, a paused job's resume overrides).
func holdTemplate(cur, want *appsv1.StatefulSet, obs *Observed) bool {
	curHash, ok := cur.Annotations[troupev1.AnnotationTemplateHash]
	if (ok && curHash == want.Annotations[troupev1.AnnotationTemplateHash]) ||
		ptr.Deref(want.Spec.Replicas, 1) == 0 || !jobHasLivePods(obs) {
		return false
	}
	want.Spec.Template = *cur.Spec.Template.DeepCopy()
	if ok {
		want.Annotations[troupev1.AnnotationTemplateHash] = curHash
	} else {
		delete(want.Annotations, troupev1.AnnotationTemplateHash)
	}
	return true
}

// restoreTemplate writes want's pod template into cur when its hash differs (and holdTemplate
// did not hold it back). The template is compared by hash, not field by field, so defaults
// the API server filled in never cause a write. A StatefulSet written by a release that
// recorded no template hash counts as different.
func restoreTemplate(cur, want *appsv1.StatefulSet) bool {
	wantHash, ok := want.Annotations[troupev1.AnnotationTemplateHash]
	if curHash, has := cur.Annotations[troupev1.AnnotationTemplateHash]; has == ok && curHash == wantHash {
		return false
	}
	cur.Spec.Template = want.Spec.Template
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	if ok {
		cur.Annotations[troupev1.AnnotationTemplateHash] = wantHash
	} else {
		delete(cur.Annotations, troupev1.AnnotationTemplateHash)
	}
	return true
}

// setTemplateHash records the hash of a StatefulSet's pod template as built.
func setTemplateHash(sts *appsv1.StatefulSet) {
	data, err := json.Marshal(&sts.Spec.Template)
	if err != nil {
		// The template was built from typed API structs, which always marshal.
		panic(fmt.Sprintf("marshal pod template of %s: %v", sts.Name, err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[troupev1.AnnotationTemplateHash] = strconv.FormatUint(h.Sum64(), 36)
}

// jobHasLivePods reports whether any pod of the job is pending or running, or a worker
// StatefulSet counts pods the cache has not shown yet.
func jobHasLivePods(obs *Observed) bool {
	for i := range obs.Pods {
		if p := &obs.Pods[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return true
		}
	}
	for _, sts := range obs.StatefulSets {
		if sts.Status.Replicas > 0 {
			return true
		}
	}
	return false
}

// templateDriftCondition is True while a template change is held back. The condition is added
// only to a job that drifted, and then stays, False, once the change is written.
func templateDriftCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	const t = troupev1.ConditionTemplateDrift
	if len(obs.HeldTemplates) > 0 {
		return newCondition(t, true, troupev1.ReasonTemplateChangeHeld,
			"the pod template of StatefulSet "+strings.Join(obs.HeldTemplates, ", ")+
				" differs from the one troupe would write now (a spec change or a new operator release); "+
				"running pods are left as they are and the new template is written once no pod of the job runs"), true
	}
	if meta.FindStatusCondition(prev.Conditions, t) == nil {
		return metav1.Condition{}, false
	}
	return newCondition(t, false, troupev1.ReasonTemplatesCurrent, "every worker StatefulSet has the pod template troupe wants"), true
}
