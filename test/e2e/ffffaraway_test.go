package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const exampleFFFFFaraway = "../../examples/mpijob-ffffaraway.yaml"

// FFFFFaraway MPI-Operator's README example, as published, in the namespace it names: five
// workers run their own command with their readinessProbe kept, the launcher runs the user's
// horovodrun with the hostfile in $OMPI_MCA_orte_default_hostfile and KubeExec as its way in,
// the stored job keeps its form, and it runs to Succeeded.
func TestMPIJobFFFFFarawayExample(t *testing.T) {
	t.Parallel() // its fixed namespace, sw-mpi-operator, is no other test's
	ctx := context.Background()
	const ns, name = "sw-mpi-operator", "simple-train-cpu"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	job := testutil.Load[*troupev1.MPIJob](t, exampleFFFFFaraway, ns)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatalf("create the FFFFFaraway example: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), job) })

	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(troupev1.GroupVersion.WithKind("MPIJob"))
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), stored); err != nil {
		t.Fatal(err)
	}
	if _, has, _ := unstructured.NestedMap(stored.Object, "spec", "worker"); has {
		t.Errorf("defaulting added spec.worker to a job of the numWorkers form: %v", stored.Object["spec"])
	}

	waitForMPIJob(t, ns, name, "Succeeded", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobSucceeded })

	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker"}, &sts); err != nil {
		t.Fatal(err)
	}
	worker := sts.Spec.Template.Spec.Containers[0]
	if worker.Name != "horovod-worker" || !slices.Equal(worker.Command, []string{"/bin/sh", "-c"}) ||
		len(worker.Args) != 1 || !strings.Contains(worker.Args[0], "touch /ready.txt") || worker.ReadinessProbe == nil {
		t.Errorf("worker container is not the user's (command, args, readinessProbe): %+v", worker)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-mpi"}, &cm); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(cm.Data[mpi.HostfileKey], name+"-worker-"); got != 5 {
		t.Errorf("hostfile lists %d workers, want numWorkers 5:\n%s", got, cm.Data[mpi.HostfileKey])
	}
	var launcher batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-launcher"}, &launcher); err != nil {
		t.Fatal(err)
	}
	main := launcher.Spec.Template.Spec.Containers[0]
	if main.Name != "horovod-master" || !strings.Contains(strings.Join(main.Args, " "), "horovodrun") {
		t.Errorf("launcher container is not the user's: %+v", main)
	}
	if !hasEnv(main.Env, "OMPI_MCA_orte_default_hostfile", mpi.HostfilePath) || !hasEnv(main.Env, mpi.EnvExecContainer, "horovod-worker") {
		t.Errorf("launcher lacks the hostfile or the exec target in its environment: %+v", main.Env)
	}
	if launcher.Spec.Template.Spec.ServiceAccountName != name+"-exec" || len(launcher.Spec.Template.Spec.InitContainers) == 0 {
		t.Errorf("launcher does not wait for its workers through KubeExec: serviceAccount %q, init containers %d",
			launcher.Spec.Template.Spec.ServiceAccountName, len(launcher.Spec.Template.Spec.InitContainers))
	}
}

// waitForMPIJob waits until the MPIJob ns/name satisfies pred.
func waitForMPIJob(t *testing.T, ns, name, what string, pred func(*troupev1.MPIJob) bool) {
	t.Helper()
	job := &troupev1.MPIJob{}
	eventually(t, "MPIJob "+name+" "+what, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
		return err == nil && pred(job), err
	})
}

func hasEnv(env []corev1.EnvVar, name, value string) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name && e.Value == value })
}
