package engine

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
// the master Job whole.
func TestCachedWorkerJobsAreTheirOutline(t *testing.T) {
	s := testSpec()
	s.Backend = rankBackend{}
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion = true
	ws.Template.Annotations = map[string]string{"bulk": "a large value"}
	ws.Template.Labels["team-tag"] = "x"
	j := BuildWorkerJobs(s, ws, false)[0]
	j.Status.Active = 1
	jobs := childTypes[slices.IndexFunc(childTypes, func(c childType) bool { _, ok := c.object.(*batchv1.Job); return ok })]
	out, err := jobs.cacheTransform(j.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*batchv1.Job)
	tmpl := got.Spec.Template
	if tmpl.Annotations != nil || tmpl.Spec.Containers[0].Image != "" || tmpl.Labels["team-tag"] != "" || tmpl.Labels[troupev1.LabelWorkerSet] != "cpu" {
		t.Errorf("cached worker template: %+v", tmpl)
	}
	if got.Status.Active != 1 || got.Annotations[troupev1.AnnotationIndexedTemplateHash] == "" || got.Labels[troupev1.LabelWorkerSet] != "cpu" {
		t.Errorf("cached worker Job lost its status or metadata: %+v %+v", got.ObjectMeta, got.Status)
	}
	master := BuildMasterJob(s)
	master.Spec.Template.Annotations = map[string]string{"bulk": "a large value"}
	out, err = jobs.cacheTransform(master.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*batchv1.Job); m.Spec.Template.Annotations["bulk"] == "" || m.Spec.Template.Spec.Containers[0].Image == "" {
		t.Errorf("the master Job is not held whole: %+v", m.Spec.Template)
	}
}
