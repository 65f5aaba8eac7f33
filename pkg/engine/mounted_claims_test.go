package engine

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// claimMountingAdapter is masterOnlyAdapter whose master template mounts the claim named
// claim as its second volume.
type claimMountingAdapter struct {
	masterOnlyAdapter
	claim string
}

func (a claimMountingAdapter) Describe(job Object, s *Spec) error {
	if err := a.masterOnlyAdapter.Describe(job, s); err != nil {
		return err
	}
	s.Master.TemplateField = "spec.master.template"
	s.Master.Template.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ckpt", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: a.claim}}},
	}
	return nil
}

// claimOfJob is a claim troupe made for a job: labelled with its kind's name label, name and
// UID; owned by the job unless retained.
func claimOfJob(name, jobName, jobUID string, retained bool) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{
		troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: jobUID,
		troupev1.LabelJobName: jobName, "chainerjob.troupe.dev/name": jobName,
	}}}
	if !retained {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: troupev1.GroupVersion.String(), Kind: "ChainerJob", Name: jobName,
			UID: types.UID(jobUID), Controller: ptr.To(true)}}
	}
	return c
}

// reconcileMounting runs one pass of the job "train" (UID uid-1) whose master mounts claim,
// with objs on the fake API server; it returns the job as stored after it, whether the
// master Job was created, the pass's result and the events it recorded.
func reconcileMounting(t *testing.T, claim string, objs ...client.Object) (*troupev1.ChainerJob, bool, reconcile.Result, []string) {
	t.Helper()
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, append(objs, job)...)
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: rec,
		adapter: claimMountingAdapter{claim: claim}, gvk: chainerJobGVK, clock: clocktesting.NewFakePassiveClock(metav1.Now().Time)}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
	if err != nil {
		t.Fatal(err)
	}
	var got troupev1.ChainerJob
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	created := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}) == nil
	var seen []string
	for len(rec.Events) > 0 {
		seen = append(seen, <-rec.Events)
	}
	return &got, created, res, seen
}

// A job whose pod template mounts a claim another troupe job made is refused before anything
// is created: Initialized False, reason ClaimOfAnotherJob, the message naming the volume's
// field, the claim and the job it belongs to; a Warning event says the same, and the job looks
// again later (the other job's claim may go away).
func TestMountingAnotherJobsClaimIsRefused(t *testing.T) {
	for name, claim := range map[string]*corev1.PersistentVolumeClaim{
		"owned by the other job": claimOfJob("victim-ckpt", "victim", "uid-victim", false),
		"retained by it":         claimOfJob("victim-ckpt", "victim", "uid-victim", true),
		"another kind's of this job's name": func() *corev1.PersistentVolumeClaim {
			c := claimOfJob("victim-ckpt", "train", "uid-torch", true)
			delete(c.Labels, "chainerjob.troupe.dev/name")
			c.Labels["pytorchjob.troupe.dev/name"] = "train"
			return c
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			got, created, res, seen := reconcileMounting(t, "victim-ckpt", claim)
			ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
			const field = "spec.master.template.spec.volumes[1].persistentVolumeClaim.claimName"
			if ini == nil || ini.Status != metav1.ConditionFalse || ini.Reason != troupev1.ReasonClaimOfAnotherJob ||
				!strings.Contains(ini.Message, field) || !strings.Contains(ini.Message, "victim-ckpt") ||
				!strings.Contains(ini.Message, "/"+claim.Labels[troupev1.LabelJobName]+" (UID "+claim.Labels[troupev1.LabelJobUID]+")") {
				t.Errorf("Initialized = %+v, want ClaimOfAnotherJob naming %s, the claim and its job", ini, field)
			}
			if created {
				t.Error("the master Job was created")
			}
			if len(seen) != 1 || !strings.HasPrefix(seen[0], "Warning "+troupev1.ReasonClaimOfAnotherJob+" ") || !strings.Contains(seen[0], field) {
				t.Errorf("events %q, want one Warning %s naming the field", seen, troupev1.ReasonClaimOfAnotherJob)
			}
			if res.RequeueAfter == 0 {
				t.Error("the job does not look again")
			}
		})
	}
}

// What a job may mount by name: a claim troupe did not make (the user's own), one it has not
// made yet, one of this job's, and one an earlier job of its kind and name retained.
func TestMountingClaimsThatAreNotAnotherJobs(t *testing.T) {
	for name, tc := range map[string]struct {
		claim string
		objs  []client.Object
	}{
		"the user's own": {"data", []client.Object{&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ml"}}}},
		"none yet":       {"data", nil},
		"the job's own":  {"train-ckpt", []client.Object{claimOfJob("train-ckpt", "train", "uid-1", false)}},
		"retained by an earlier job of this kind and name": {"train-ckpt",
			[]client.Object{claimOfJob("train-ckpt", "train", "uid-before", true)}},
	} {
		t.Run(name, func(t *testing.T) {
			got, created, _, _ := reconcileMounting(t, tc.claim, tc.objs...)
			if ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); ini != nil && ini.Status == metav1.ConditionFalse && ini.Reason == troupev1.ReasonClaimOfAnotherJob {
				t.Errorf("refused: %+v", ini)
			}
			if !created {
				t.Error("the master Job was not created")
			}
		})
	}
}

// An earlier job's claim still owned by it (not retained) is another job's even under this
// job's name: it is deleted with that job, which is not this one.
func TestMountingAnEarlierJobsOwnedClaimIsRefused(t *testing.T) {
	got, created, _, _ := reconcileMounting(t, "train-ckpt", claimOfJob("train-ckpt", "train", "uid-before", false))
	if ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); ini == nil || ini.Reason != troupev1.ReasonClaimOfAnotherJob || created {
		t.Errorf("Initialized = %+v, master Job created %v; want ClaimOfAnotherJob and none", ini, created)
	}
}

// The claims checked are those the templates name themselves, at their fields: a volume that
// runPolicy.storage replaces with a claim of the job's own is not.
func TestMountedClaimsOfTheTemplates(t *testing.T) {
	s := testSpec()
	s.Master.TemplateField = "spec.master.template"
	s.WorkerSets[0].TemplateField = "spec.workerSets[cpu].template"
	pvc := func(name, claim string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	s.Master.Template.Spec.Volumes = []corev1.Volume{pvc("data", "replaced-on-master"), pvc("in", "dataset")}
	s.WorkerSets[0].Template.Spec.Volumes = []corev1.Volume{pvc("ckpt", "replaced-on-cpu"), pvc("in", "dataset")}
	s.WorkerSets[1].Template.Spec.Volumes = []corev1.Volume{pvc("ckpt", "kept-on-gpu")}
	s.RunPolicy.Storage = &troupev1.Storage{
		ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", WorkerSets: []string{"cpu"}}},
		SharedClaims:   []troupev1.SharedClaim{{Name: "data"}},
	}
	var got []string
	for _, m := range s.mountedClaims() {
		got = append(got, m.field+"="+m.claim)
	}
	want := []string{
		"spec.master.template.spec.volumes[1].persistentVolumeClaim.claimName=dataset",
		"spec.workerSets[cpu].template.spec.volumes[1].persistentVolumeClaim.claimName=dataset",
		"worker set gpu's template.spec.volumes[0].persistentVolumeClaim.claimName=kept-on-gpu",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mounted claims:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Once the other job's claim is gone, the refused job's next pass (it asked to look again)
// creates its children.
func TestMountingAfterTheOtherClaimIsGone(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	other := claimOfJob("victim-ckpt", "victim", "uid-victim", false)
	c := fakeJobClient(t, job, other)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: events.NewFakeRecorder(10),
		adapter: claimMountingAdapter{claim: "victim-ckpt"}, gvk: chainerJobGVK, clock: clocktesting.NewFakePassiveClock(metav1.Now().Time)}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	master := client.ObjectKey{Namespace: "ml", Name: "train-master"}
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != conflictRecheck || c.Get(ctx, master, &batchv1.Job{}) == nil {
		t.Fatalf("first pass: looks again after %v, master Job created %v; want %v and none", res.RequeueAfter, c.Get(ctx, master, &batchv1.Job{}) == nil, conflictRecheck)
	}
	if err := c.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, master, &batchv1.Job{}); err != nil {
		t.Errorf("after the other claim is gone: master Job %v, want created", err)
	}
}
