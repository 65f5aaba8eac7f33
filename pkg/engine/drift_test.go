package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A worker template change is held back while pods of the job live, unless the workers are
// being released; a scale alone is no template change.
func TestHoldTemplate(t *testing.T) {
	s := testSpec()
	ws := &s.WorkerSets[0]
	written := BuildWorkerStatefulSet(s, ws, false)
	running := &Observed{Pods: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodRunning}}}}
	ended := &Observed{Pods: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}}}

	changed := *s
	changed.WorkerSets = append([]WorkerSet(nil), s.WorkerSets...)
	changed.WorkerSets[0].Template = *ws.Template.DeepCopy()
	changed.WorkerSets[0].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NEW", Value: "1"}}
	scaled := *s
	scaled.WorkerSets = append([]WorkerSet(nil), s.WorkerSets...)
	scaled.WorkerSets[0].Replicas = 7

	for name, c := range map[string]struct {
		spec     *Spec
		released bool
		obs      *Observed
		wantHeld bool
	}{
		"a new template while a pod runs":           {spec: &changed, obs: running, wantHeld: true},
		"a new template once every pod ended":       {spec: &changed, obs: ended},
		"a new template while workers are released": {spec: &changed, released: true, obs: running},
		"a scale while a pod runs":                  {spec: &scaled, obs: running},
	} {
		t.Run(name, func(t *testing.T) {
			cur := written.DeepCopy()
			want := BuildWorkerStatefulSet(c.spec, &c.spec.WorkerSets[0], c.released)
			held := holdTemplate(cur, want, c.obs)
			if held != c.wantHeld {
				t.Fatalf("held = %v, want %v", held, c.wantHeld)
			}
			restore(cur, want)
			_, rewritten := envOf(cur.Spec.Template.Spec.Containers[0])["NEW"]
			if wantRewritten := c.spec == &changed && !c.wantHeld; rewritten != wantRewritten {
				t.Errorf("template rewritten = %v, want %v", rewritten, wantRewritten)
			}
			if cur.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
				t.Errorf("updateStrategy = %q, want OnDelete", cur.Spec.UpdateStrategy.Type)
			}
		})
	}
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// A StatefulSet of a release before OnDelete is switched to it, with no template write.
func TestRestoreSwitchesToOnDelete(t *testing.T) {
	s := testSpec()
	want := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	cur := want.DeepCopy()
	cur.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	if !restore(cur, want) || cur.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("updateStrategy = %q after restore, want OnDelete", cur.Spec.UpdateStrategy.Type)
	}
}

// A worker StatefulSet written by a release before the common job-name label (its metadata,
// selector and pod template without it) is upgraded in place: the label is added to its
// metadata, and its template, the same to the pods, is neither held back nor rewritten, so a
// running job shows no drift and its workers keep their pods.
func TestStatefulSetFromBeforeTheJobNameLabel(t *testing.T) {
	s := testSpec()
	want := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	old := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	delete(old.Labels, troupev1.LabelJobName)
	delete(old.Spec.Template.Labels, troupev1.LabelJobName)
	delete(old.Annotations, troupev1.AnnotationSpecHash)
	setTemplateHash(old, &old.Spec.Template)
	old = withSpecHash(old) // as the older release hashed what it built
	cur := old.DeepCopy()
	running := &Observed{Pods: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodRunning}}}}

	if holdTemplate(cur, want, running) {
		t.Error("the template is held back: the job would report TemplateDrift after an upgrade")
	}
	if !restore(cur, want) {
		t.Fatal("restore changed nothing: the StatefulSet does not get the job-name label")
	}
	if cur.Labels[troupev1.LabelJobName] != s.Name {
		t.Errorf("labels %v: want %s=%s", cur.Labels, troupev1.LabelJobName, s.Name)
	}
	if _, ok := cur.Spec.Template.Labels[troupev1.LabelJobName]; ok {
		t.Error("the running StatefulSet's pod template was rewritten for a label")
	}
	if diff := cmp.Diff(old.Spec, cur.Spec); diff != "" {
		t.Errorf("the spec changed (its generation would move) (-old +restored):\n%s", diff)
	}
}

// The scheduling directives of a suspended master Job that never started follow the spec;
// a Job that started keeps them (the API server would refuse the write).
func TestRestoreSchedulingDirectives(t *testing.T) {
	s := testSpec()
	s.RunPolicy.Suspend = ptr.To(true)
	cur := BuildMasterJob(s)
	s.Master.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
	s.RunPolicy.Suspend = ptr.To(false)
	want := BuildMasterJob(s)

	started := cur.DeepCopy()
	started.Status.StartTime = &metav1.Time{}
	if restoreSchedulingDirectives(started, want) {
		t.Error("a started Job's scheduling directives rewritten")
	}
	if !restore(cur, want) {
		t.Fatal("nothing restored")
	}
	if got := cur.Spec.Template.Spec.NodeSelector["pool"]; got != "a" || ptr.Deref(cur.Spec.Suspend, true) {
		t.Errorf("master Job nodeSelector pool = %q, suspend %v; want a, false", got, cur.Spec.Suspend)
	}
}

func TestTemplateDriftCondition(t *testing.T) {
	if _, ok := templateDriftCondition(&Observed{}, &troupev1.JobStatus{}); ok {
		t.Error("a job that never drifted got a TemplateDrift condition")
	}
	c, ok := templateDriftCondition(&Observed{HeldTemplates: []string{"j-worker"}}, &troupev1.JobStatus{})
	if !ok || c.Status != metav1.ConditionTrue || c.Reason != troupev1.ReasonTemplateChangeHeld {
		t.Errorf("held: %+v", c)
	}
	prev := &troupev1.JobStatus{Conditions: []metav1.Condition{c}}
	c, ok = templateDriftCondition(&Observed{}, prev)
	if !ok || c.Status != metav1.ConditionFalse || c.Reason != troupev1.ReasonTemplatesCurrent {
		t.Errorf("after the drift: %+v", c)
	}
}

func TestSecretDataHash(t *testing.T) {
	a := secretDataHash(map[string][]byte{"a": []byte("bc"), "d": []byte("")})
	if b := secretDataHash(map[string][]byte{"d": []byte(""), "a": []byte("bc")}); a != b {
		t.Error("the hash depends on map order")
	}
	if b := secretDataHash(map[string][]byte{"ab": []byte("c"), "d": []byte("")}); a == b {
		t.Error("moving a byte from a value to its key kept the hash")
	}
	if len(a) != 64 {
		t.Errorf("hash %q is not hex SHA-256", a)
	}
}
