package integration

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// mountingPyTorchJob is the PyTorchJob example named name whose workers mount claim as their
// second volume (the first is a scratch emptyDir).
func mountingPyTorchJob(t *testing.T, ns, name, claim string) *troupev1.PyTorchJob {
	t.Helper()
	job := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", ns)
	job.Name = name
	w := &job.Spec.PyTorchReplicaSpecs.Worker.Template.Spec
	w.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ckpt", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
	}
	w.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}}
	return job
}

// batchJobsOf counts the batch Jobs of the job of UID uid.
func batchJobsOf(t *testing.T, ns string, uid string) int {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{troupev1.LabelJobUID: uid}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// A job whose workers mount, by name, the shared claim another PyTorchJob's storage made (its
// checkpoints, say) is refused: Initialized False with reason ClaimOfAnotherJob naming the
// volume's field and the job the claim belongs to, a Warning event, and no batch Job (so no
// pod). A claim of the user's own, which troupe did not make, stays mountable.
func TestMountingAnotherJobsClaimIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	victim := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", ns)
	victim.Name = "victim"
	victim.Spec.RunPolicy.Storage = &troupev1.Storage{SharedClaims: []troupev1.SharedClaim{{Name: "data", Spec: testClaimSpec("1Gi")}}}
	if err := k8s.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &corev1.PersistentVolumeClaim{}, ns, "victim-data")

	thief := mountingPyTorchJob(t, ns, "thief", "victim-data")
	if err := k8s.Create(ctx, thief); err != nil {
		t.Fatal(err)
	}
	const field = "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[1].persistentVolumeClaim.claimName"
	refused := waitUntil(t, &troupev1.PyTorchJob{}, ns, thief.Name, "refused with ClaimOfAnotherJob", func(j *troupev1.PyTorchJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == troupev1.ReasonClaimOfAnotherJob
	})
	msg := meta.FindStatusCondition(refused.Status.Conditions, troupev1.ConditionInitialized).Message
	if !strings.Contains(msg, field) || !strings.Contains(msg, "pytorchjob/victim (UID "+string(victim.UID)+")") {
		t.Errorf("Initialized message %q, want it to name %s and pytorchjob/victim with its UID", msg, field)
	}
	waitForEvent(t, ns, thief.Name, troupev1.ReasonClaimOfAnotherJob, field)
	if n := batchJobsOf(t, ns, string(refused.UID)); n > 0 {
		t.Errorf("the refused job has %d batch Jobs, want none", n)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "thief"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused job's Service: %v, want none created", err)
	}

	mine := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "my-data", Namespace: ns}, Spec: testClaimSpec("1Gi")}
	if err := k8s.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	owner := mountingPyTorchJob(t, ns, "owner", "my-data")
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	w := waitFor(t, &batchv1.Job{}, ns, "owner-worker-0")
	if got := volumeClaim(&w.Spec.Template, "ckpt"); got != "my-data" {
		t.Errorf("the worker Job mounts ckpt from %q, want the user's my-data", got)
	}
}

// A PyTorchJob stored without the webhook (this suite has none) whose shared claim is bound to
// a named PersistentVolume is not run by an operator that does not allow it: InvalidSpec naming
// the field and the flag, and no claim created.
func TestClaimBoundToAVolumeRefusedByTheEngine(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	job := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", ns)
	spec := testClaimSpec("1Gi")
	spec.VolumeName = "pv-of-another-tenant"
	job.Spec.RunPolicy.Storage = &troupev1.Storage{SharedClaims: []troupev1.SharedClaim{{Name: "data", Spec: spec}}}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	const field = "spec.runPolicy.storage.sharedClaims[0].spec.volumeName"
	refused := waitUntil(t, &troupev1.PyTorchJob{}, ns, job.Name, "InvalidSpec", func(j *troupev1.PyTorchJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonInvalidSpec
	})
	msg := meta.FindStatusCondition(refused.Status.Conditions, troupev1.ConditionInitialized).Message
	if !strings.Contains(msg, field) || !strings.Contains(msg, troupev1.AllowClaimVolumeSourcesFlag) {
		t.Errorf("Initialized message %q, want it to name %s and %s", msg, field, troupev1.AllowClaimVolumeSourcesFlag)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name + "-data"}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim %s-data: %v, want none created", job.Name, err)
	}
	if n := batchJobsOf(t, ns, string(refused.UID)); n > 0 {
		t.Errorf("the refused job has %d batch Jobs, want none", n)
	}
}
