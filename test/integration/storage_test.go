package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
