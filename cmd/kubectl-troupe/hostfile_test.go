package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A job without a hostfile says why, from the backend the operator's adapter gives it.
func TestNoHostfile(t *testing.T) {
	alone := testutil.MakeChainerJob("alone", "ns").Obj()
	alone.Spec.Backend = troupev1.ChainerBackendNone
	mpiJob := testutil.MakeChainerJob("mn", "ns").WorkerSet("ws0", 2).Obj()
	mpiJob.Status.Phase = troupev1.JobPending
	torch := testutil.Load[*troupev1.PyTorchJob](t, "../../examples/pytorchjob.yaml", "ns")
	cases := []struct {
		job  job
		want string
	}{
		{testJob(t, alone), "chainerjob.troupe.dev/alone has no hostfile: it has no MPI backend (spec.backend none): its master runs alone"},
		{testJob(t, mpiJob), "chainerjob.troupe.dev/mn has no hostfile: the operator has not written its ConfigMap mn-mpi yet (the job is pending)"},
		{testJob(t, torch), "pytorchjob.troupe.dev/" + torch.Name + " has no hostfile: it runs PyTorch, whose processes find each other through torch's rendezvous"},
	}
	for _, c := range cases {
		err := noHostfile(c.job)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("noHostfile(%s) = %v, want %s", c.job.ref(), err, c.want)
		}
	}
}

func TestHostfileConfigMap(t *testing.T) {
	cms := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "pi-code"}, Data: map[string]string{"x": "y"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pi-mpi"}, Data: map[string]string{"hostfile": "pi-worker-0.pi slots=1\n"}},
	}
	if cm := hostfileConfigMap(cms); cm == nil || cm.Name != "pi-mpi" {
		t.Errorf("hostfileConfigMap = %v, want pi-mpi", cm)
	}
	if cm := hostfileConfigMap(cms[:1]); cm != nil {
		t.Errorf("hostfileConfigMap = %s, want none", cm.Name)
	}
}
