package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

func testClaimSpec(size string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}
}

// volumeClaim is the claim a pod template mounts as volume name, or "".
func volumeClaim(tmpl *corev1.PodTemplateSpec, name string) string {
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == name && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// An MPIJob with a claim per worker and a shared claim: the API server accepts the worker
// StatefulSet with its claim template (kept on scale-down, deleted with it), the operator makes
// the shared claim, owned by the job, and every pod template mounts it; the storage cannot
// change once the job exists.
func TestStorageOfAStatefulSetSet(t *testing.T) {
	ns := newNamespace(t)
	job := smallMPIJob(t, ns)
	job.Spec.RunPolicy.Storage = &troupev1.Storage{
		ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: testClaimSpec("1Gi")}},
		SharedClaims:   []troupev1.SharedClaim{{Name: "data", Spec: testClaimSpec("2Gi")}},
	}
	createMPIJob(t, job)
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "ckpt" ||
		sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType ||
		sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("StatefulSet claims %+v, retention %+v", sts.Spec.VolumeClaimTemplates, sts.Spec.PersistentVolumeClaimRetentionPolicy)
	}
	data := waitFor(t, &corev1.PersistentVolumeClaim{}, ns, "mpi-example-data")
	if !metav1.IsControlledBy(data, job) || data.Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Errorf("shared claim: owners %v, size %v; want the job's, 2Gi", data.OwnerReferences, data.Spec.Resources.Requests)
	}
	launcher := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	if volumeClaim(&launcher.Spec.Template, "data") != "mpi-example-data" || volumeClaim(&sts.Spec.Template, "data") != "mpi-example-data" {
		t.Errorf("the launcher and the workers do not both mount the shared claim: %v / %v", launcher.Spec.Template.Spec.Volumes, sts.Spec.Template.Spec.Volumes)
	}
	out, err := runKubectl("patch", "-n", ns, "mpijob/mpi-example", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/runPolicy/storage/sharedClaims/0/spec/resources/requests/storage","value":"3Gi"}]`)
	if err == nil || !strings.Contains(out+err.Error(), "runPolicy.storage: cannot change once the job exists") {
		t.Errorf("changing the storage of a job that exists: %v\n%s", err, out)
	}
}

// A PyTorchJob's workers run to completion, one Job per pod: the operator makes one claim per
// worker, each mounted by its worker's Job alone; retained claims have no owner, so deleting
// the job leaves them.
func TestStorageOfASetOfJobs(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", ns)
	job.Spec.RunPolicy.Storage = &troupev1.Storage{
		ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: testClaimSpec("1Gi")}},
		Retention:      ptr.To(troupev1.ClaimRetentionRetain),
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	for _, i := range []string{"0", "1"} {
		name := job.Name + "-worker-" + i
		claim := waitFor(t, &corev1.PersistentVolumeClaim{}, ns, "ckpt-"+name)
		if len(claim.OwnerReferences) != 0 {
			t.Errorf("retained claim %s has owners %v", claim.Name, claim.OwnerReferences)
		}
		worker := waitFor(t, &batchv1.Job{}, ns, name)
		if got := volumeClaim(&worker.Spec.Template, "ckpt"); got != "ckpt-"+name {
			t.Errorf("Job %s mounts ckpt from %q, want ckpt-%s", name, got, name)
		}
	}
	master := waitFor(t, &batchv1.Job{}, ns, job.Name+"-master")
	if got := volumeClaim(&master.Spec.Template, "ckpt"); got != "" {
		t.Errorf("the master, in no worker set, mounts ckpt from %q", got)
	}
}

// A claim the job would make that already exists and is not the job's (another job's, or a
// tenant's planted before it: claim names repeat across jobs) is never mounted: the job reports
// ChildNameConflict naming it and creates nothing; once it is gone the job starts (a retained
// claim an earlier job of the same kind and name left is the job's: TestClaimIsTheJobs).
func TestClaimsThatAreNotTheJobs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	load := func() *troupev1.PyTorchJob {
		job := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", ns)
		job.Spec.RunPolicy.Storage = &troupev1.Storage{
			ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: testClaimSpec("1Gi")}},
			Retention:      ptr.To(troupev1.ClaimRetentionRetain),
		}
		return job
	}
	job := load()
	planted := "ckpt-" + job.Name + "-worker-1"
	// Labelled as another job's: troupe's, its UID and name.
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: planted, Namespace: ns, Labels: map[string]string{
		troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: "another-job", "pytorchjob.troupe.dev/name": "another"}},
		Spec: testClaimSpec("1Gi")}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ChildNameConflict naming the planted claim", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonChildConflict && strings.Contains(c.Message, "PersistentVolumeClaim "+planted), nil
	})
	var workers batchv1.JobList
	if err := k8s.List(ctx, &workers, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(workers.Items) > 0 {
		t.Errorf("the job created %d batch Jobs beside a claim that is not its own, want none", len(workers.Items))
	}
	if err := k8s.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// No pod uses it: kube-controller-manager would lift its pvc-protection finalizer, which
	// envtest runs none of.
	if err := k8s.Patch(ctx, foreign, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	// The job looks again within 10 s.
	mine := &corev1.PersistentVolumeClaim{}
	eventually(t, "the job's own claim "+planted, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: planted}, mine)
		return err == nil && mine.UID != foreign.UID, client.IgnoreNotFound(err)
	})
	waitFor(t, &batchv1.Job{}, ns, job.Name+"-worker-1")
	if mine.Labels[troupev1.LabelJobUID] != string(job.UID) {
		t.Errorf("claim %s labelled with job UID %q, want the job's %q", planted, mine.Labels[troupev1.LabelJobUID], job.UID)
	}
}
