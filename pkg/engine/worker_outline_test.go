package engine

import (
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A worker Job built as its outline (what a pass builds of a Job that exists) says what the
// whole Job says of itself: the same labels, suspension, scheduling directives and hashes, so
// comparing the existing Job with either gives one answer; a change of the set's template, or
// of what one index adds to it, changes its indexed hash.
func TestWorkerJobOutlineIsTheWholeJobsIdentity(t *testing.T) {
	s := testSpec()
	s.Backend = rankBackend{}
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion = true
	ws.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	whole := BuildWorkerJobs(s, ws, false)
	outline := buildWorkerJobs(s, ws, false, func(string) bool { return false })
	indexed := map[string]bool{}
	for i := range whole {
		w, o := whole[i], outline[i]
		for _, a := range []string{troupev1.AnnotationSpecHash, troupev1.AnnotationSetTemplateHash, troupev1.AnnotationIndexedTemplateHash} {
			if w.Annotations[a] == "" || w.Annotations[a] != o.Annotations[a] {
				t.Errorf("%s: %s %q whole, %q outline", w.Name, a, w.Annotations[a], o.Annotations[a])
			}
		}
		if _, ok := o.Annotations[troupev1.AnnotationTemplateHash]; ok {
			t.Errorf("%s: the outline carries a whole template's hash", o.Name)
		}
		if o.Spec.Template.Spec.NodeSelector["pool"] != "gpu" || o.Spec.Template.Spec.Containers[0].Image != "" {
			t.Errorf("%s: outline template %+v", o.Name, o.Spec.Template.Spec)
		}
		if workerTemplateChanged(w, o) || workerTemplateChanged(w, w) {
			t.Errorf("%s: its own outline or whole form counts as a changed template", w.Name)
		}
		indexed[w.Annotations[troupev1.AnnotationIndexedTemplateHash]] = true
	}
	if len(indexed) != len(whole) {
		t.Errorf("the indexes share indexed hashes: %v", indexed)
	}

	// Another image: the set's hash, and so each index's, changes.
	changed := testSpec()
	changed.Backend = rankBackend{}
	cws := &changed.WorkerSets[0]
	cws.RunsToCompletion = true
	cws.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	cws.Template.Spec.Containers[0].Image = "train:2"
	for i, o := range buildWorkerJobs(changed, cws, false, func(string) bool { return false }) {
		if !workerTemplateChanged(whole[i], o) {
			t.Errorf("%s: a new image is not a changed template", o.Name)
		}
	}
	// What only an index adds (its rank): the indexed hash alone tells.
	shifted := testSpec()
	shifted.Backend = shiftedRanks{}
	sws := &shifted.WorkerSets[0]
	sws.RunsToCompletion = true
	sws.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	for i, o := range buildWorkerJobs(shifted, sws, false, func(string) bool { return false }) {
		if o.Annotations[troupev1.AnnotationSetTemplateHash] != whole[i].Annotations[troupev1.AnnotationSetTemplateHash] {
			t.Fatalf("%s: the set's template changed too", o.Name)
		}
		if !workerTemplateChanged(whole[i], o) {
			t.Errorf("%s: another rank is not a changed template", o.Name)
		}
	}
}

// shiftedRanks tells each index another rank than rankBackend does.
type shiftedRanks struct{ envBackend }

func (shiftedRanks) DecorateIndexedPod(s *Spec, ws *WorkerSet, index int32, tmpl *corev1.PodTemplateSpec) {
	rankBackend{}.DecorateIndexedPod(s, ws, index+1, tmpl)
}

// A worker Job made by a release before the indexed hash is compared by its whole template's
// hash: the pass builds it whole (wholeWorkerJobNeeded), and a Job whose template is the wanted
// one is not replaced.
func TestWorkerJobOfAnEarlierReleaseIsComparedWhole(t *testing.T) {
	s := testSpec()
	s.Backend = rankBackend{}
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion = true
	old := BuildWorkerJobs(s, ws, false)[0]
	delete(old.Annotations, troupev1.AnnotationIndexedTemplateHash)
	current := BuildWorkerJobs(s, ws, false)[1]
	obs := &Observed{current: map[childRef]client.Object{keyOf(old): old, keyOf(current): current}}
	if !obs.wholeWorkerJobNeeded(old.Name) || obs.wholeWorkerJobNeeded(current.Name) || !obs.wholeWorkerJobNeeded("train-workerset-cpu-7") {
		t.Errorf("built whole: the earlier release's %t, the current %t, a missing one %t",
			obs.wholeWorkerJobNeeded(old.Name), obs.wholeWorkerJobNeeded(current.Name), obs.wholeWorkerJobNeeded("train-workerset-cpu-7"))
	}
	want := BuildWorkerJobs(s, ws, false)[0]
	if workerTemplateChanged(old, want) {
		t.Error("an earlier release's Job of the wanted template counts as changed")
	}
	want.Spec.Template.Spec.Containers[0].Image = "train:2"
	setTemplateHash(want, &want.Spec.Template)
	if !workerTemplateChanged(old, want) {
		t.Error("an earlier release's Job of another template counts as unchanged")
	}
}

// The cache holds a worker Job of a troupe job as its outline, its status and metadata whole;
// of the master Job's template what the engine reads of it (masterTemplateRead).
func TestCachedWorkerJobsAreTheirOutline(t *testing.T) {
	s := testSpec()
	s.Backend = rankBackend{}
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion = true
	ws.Template.Annotations = map[string]string{"bulk": "a large value"}
	ws.Template.Labels["team-tag"] = "x"
	j := BuildWorkerJobs(s, ws, false)[0]
	j.Status.Active = 1
	got := cachedAs(t, j)
	tmpl := got.Spec.Template
	if tmpl.Annotations != nil || tmpl.Spec.Containers[0].Image != "" || tmpl.Labels["team-tag"] != "" || tmpl.Labels[troupev1.LabelWorkerSet] != "cpu" {
		t.Errorf("cached worker template: %+v", tmpl)
	}
	if got.Status.Active != 1 || got.Annotations[troupev1.AnnotationIndexedTemplateHash] == "" || got.Labels[troupev1.LabelWorkerSet] != "cpu" {
		t.Errorf("cached worker Job lost its status or metadata: %+v %+v", got.ObjectMeta, got.Status)
	}
	master := BuildMasterJob(s)
	master.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/workload": "w"}
	master.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
	master.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "wait", Image: "agent", Args: []string{"wait"}}}
	master.Spec.Template.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	master.Spec.Template.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
	master.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BULK", Value: "a large value"}}
	m := cachedAs(t, master).Spec.Template
	if !maps.Equal(m.Labels, master.Spec.Template.Labels) || !maps.Equal(m.Annotations, master.Spec.Template.Annotations) ||
		m.Spec.NodeSelector["pool"] != "a" || m.Spec.RestartPolicy != master.Spec.Template.Spec.RestartPolicy {
		t.Errorf("the master Job's labels, annotations or scheduling are not held: %+v", m)
	}
	if !restartsInPlace(&m.Spec) || len(m.Spec.InitContainers) != 1 || m.Spec.InitContainers[0].Name != "wait" {
		t.Errorf("the master Job's restart policies or init containers are not held: %+v", m.Spec)
	}
	if c := m.Spec.Containers[0]; c.Image != "" || len(c.Env) > 0 || len(m.Spec.InitContainers[0].Args) > 0 {
		t.Errorf("the master Job's containers are held whole: %+v", m.Spec)
	}
}

// The cache holds a worker StatefulSet's template as the labels the engine reads and its
// containers' names, its spec and status otherwise whole; a ConfigMap's values as their hashes,
// which restoreConfigMap compares with the wanted data.
func TestCachedStatefulSetsAndConfigMaps(t *testing.T) {
	s := testSpec()
	sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	sts.Spec.Template.Annotations = map[string]string{"bulk": "a large value"}
	sts.Status.ReadyReplicas = 2
	got := cachedAs(t, sts)
	if tmpl := got.Spec.Template; tmpl.Annotations != nil || tmpl.Spec.Containers[0].Image != "" || tmpl.Labels[troupev1.LabelWorkerSet] == "" {
		t.Errorf("cached worker template: %+v", tmpl)
	}
	if got.Status.ReadyReplicas != 2 || *got.Spec.Replicas != *sts.Spec.Replicas || templateChanged(got, sts) {
		t.Errorf("cached StatefulSet lost its replicas, status or template hash: %+v", got)
	}
	if rewritesUnheld(got, BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)) {
		t.Error("a StatefulSet of the wanted template is read whole to be restored")
	}

	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "train-mpi", OwnerReferences: []metav1.OwnerReference{s.Owner}},
		Data: map[string]string{"hostfile": "train-worker-0 slots=1\n", "ssh_config": "Host *\n"}}
	if cur := cachedAs(t, want); cur.Data["hostfile"] == want.Data["hostfile"] || restore(cur, want) {
		t.Errorf("a ConfigMap of the wanted data, as cached (%v), is not held as hashes or is rewritten", cur.Data)
	}
	edited := want.DeepCopy()
	edited.Data["hostfile"] = "elsewhere slots=9\n"
	edited.Data["extra"] = "x"
	if cur := cachedAs(t, edited); !restore(cur, want) || !reflect.DeepEqual(cur.Data, want.Data) {
		t.Errorf("an edited ConfigMap is not put back: %v", cur.Data)
	}
}

// cachedAs is obj as the operator's cache holds it: a copy passed through its child type's
// transform (childTypeOf).
func cachedAs[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	ct := childTypeOf(obj)
	if ct == nil {
		t.Fatalf("%T is no child type", obj)
	}
	out, err := ct.cacheTransform(obj.DeepCopyObject())
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}
