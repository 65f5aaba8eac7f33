package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// t9kExample is examples/mpijob.yaml: the T9k tutorial job with only apiVersion changed.
func t9kExample(t *testing.T) *troupev1.MPIJob {
	t.Helper()
	job := testutil.Load[*troupev1.MPIJob](t, "../examples/mpijob.yaml", "ml")
	job.UID = "u1"
	return job
}

func describeMPIJob(t *testing.T, job *troupev1.MPIJob) (*engine.Spec, error) {
	t.Helper()
	s := &engine.Spec{Name: job.Name, Namespace: job.Namespace}
	return s, MPIJob{Options{AgentImage: "agent:1"}}.Describe(job, s)
}

func TestMPIJobT9kExample(t *testing.T) {
	s, err := describeMPIJob(t, t9kExample(t))
	if err != nil {
		t.Fatal(err)
	}
	wantCmd := []string{"mpirun", "--prefix", "/usr/local", "--mca", "btl", "^openib",
		"-N", "3", "--enable-recovery", "--max-restarts", "100", "--allow-run-as-root", "-bind-to", "none",
		"./random_walk", "20", "40", "2"}
	launcher := s.Master.Template.Spec.Containers
	if len(launcher) != 1 {
		t.Fatalf("launcher containers = %v, want one", launcher)
	}
	wantLauncher := corev1.Container{
		Name: "mpi-launcher", Image: "t9kpublic/mpi-tutorial:2021022-2", WorkingDir: "/usr/local/code", Command: wantCmd,
		Resources: engine.InjectedResources("100m", "256Mi", "2", "2Gi"),
	}
	if diff := cmp.Diff(wantLauncher, launcher[0]); diff != "" {
		t.Errorf("generated launcher (-want +got):\n%s", diff)
	}
	if s.Master.JobName != "mpi-example-launcher" || s.Master.IsHost || s.Master.BackoffLimit != 6 ||
		s.Master.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || s.Master.PodFailurePolicy == nil {
		t.Errorf("launcher = %+v, want mpi-example-launcher, not a host, 6 retries, restartPolicy Never, the wait's failure policy", s.Master)
	}
	ws := s.WorkerSets
	if len(ws) != 1 || ws[0].ChildName != "mpi-example-worker" || ws[0].Name != "worker" || ws[0].Replicas != 5 || ws[0].Slots != 1 {
		t.Errorf("worker sets = %+v, want mpi-example-worker with 5 pods of 1 slot", ws)
	}
	if got := ptr.Deref(s.RunPolicy.CleanPodPolicy, ""); got != troupev1.CleanPodPolicyRunning {
		t.Errorf("cleanUpWorkers: true gave cleanPodPolicy %q, want Running", got)
	}
	b := s.Backend.(mpi.Backend)
	if diff := cmp.Diff(mpi.SSH{SSHDPath: "/usr/sbin/sshd", Port: troupev1.DefaultSSHPort}, b.Transport); diff != "" {
		t.Errorf("transport (-want +got):\n%s", diff)
	}
	if b.Dialect.Implementation != mpi.OpenMPI || s.MainContainer != "mpi-worker" {
		t.Errorf("dialect %q, main container %q; want OpenMPI and mpi-worker", b.Dialect.Implementation, s.MainContainer)
	}
}

func TestMPIJobDescribe(t *testing.T) {
	tests := map[string]struct {
		mutate  func(*troupev1.MPIJob)
		check   func(*testing.T, *engine.Spec)
		wantErr string
	}{
		"an explicit launcher template runs as written": {
			mutate: func(j *troupev1.MPIJob) {
				j.Spec.Launcher = &troupev1.MPILauncher{BackoffLimit: ptr.To[int32](1), Template: &corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "l"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "launch", Image: "mine", Command: []string{"/run.sh"}}}},
				}}
			},
			check: func(t *testing.T, s *engine.Spec) {
				c := s.Master.Template.Spec.Containers
				if len(c) != 1 || c[0].Name != "launch" || c[0].Command[0] != "/run.sh" || s.Master.BackoffLimit != 1 {
					t.Errorf("launcher = %+v, want the user's template and backoffLimit 1", s.Master)
				}
			},
		},
		"SSH workers run sshd, whatever command they had": {
			mutate: func(j *troupev1.MPIJob) { j.Spec.Worker.Template.Spec.Containers[0].Command = []string{"sleep", "inf"} },
			check: func(t *testing.T, s *engine.Spec) {
				if c := s.WorkerSets[0].Template.Spec.Containers[0]; c.Command != nil {
					t.Errorf("worker command = %v, want none (the SSH transport runs sshd)", c.Command)
				}
			},
		},
		"KubeExec workers keep their command": {
			mutate: func(j *troupev1.MPIJob) {
				j.Spec.Transport = troupev1.MPITransportKubeExec
				j.Spec.Worker.Template.Spec.Containers[0].Command = []string{"sleep", "inf"}
			},
			check: func(t *testing.T, s *engine.Spec) {
				if c := s.WorkerSets[0].Template.Spec.Containers[0]; len(c.Command) != 2 {
					t.Errorf("worker command = %v, want the template's", c.Command)
				}
			},
		},
		"MPICH launches with mpiexec and no prefix": {
			mutate: func(j *troupev1.MPIJob) { j.Spec.MPIImplementation = "MPICH"; j.Spec.MCA = nil },
			check: func(t *testing.T, s *engine.Spec) {
				cmd := s.Master.Template.Spec.Containers[0].Command
				if cmd[0] != "mpiexec" || strings.Contains(strings.Join(cmd, " "), "--prefix") {
					t.Errorf("MPICH launcher = %v, want mpiexec without --prefix", cmd)
				}
			},
		},
		"MCA parameters with MPICH are refused": {
			mutate:  func(j *troupev1.MPIJob) { j.Spec.MPIImplementation = "MPICH" },
			wantErr: "spec.mca: Forbidden: MCA parameters are Open MPI's",
		},
		"an unknown implementation is refused": {
			mutate:  func(j *troupev1.MPIJob) { j.Spec.MPIImplementation = "LAM" },
			wantErr: `spec.mpiImplementation: Unsupported value: "LAM"`,
		},
		"a worker without mpi-worker is refused": {
			mutate:  func(j *troupev1.MPIJob) { j.Spec.Worker.Template.Spec.Containers[0].Name = "main" },
			wantErr: `spec.worker.template.spec.containers: Required value: must contain a container named "mpi-worker"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := t9kExample(t)
			tc.mutate(job)
			s, err := describeMPIJob(t, job)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

// A worker StatefulSet of the FFFFFaraway form scaled by hand is answered with the command that
// works for that form: the scale subresource writes spec.worker.replicas, which it does not have.
func TestFFFFFarawayScaleHint(t *testing.T) {
	job := testutil.Load[*troupev1.MPIJob](t, "../examples/mpijob-ffffaraway.yaml", "ns")
	s := &engine.Spec{Name: job.Name, Namespace: job.Namespace}
	if err := (MPIJob{}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	if hint := s.WorkerSets[0].ScaleHint; !strings.Contains(hint, `"numWorkers"`) || strings.Contains(hint, "kubectl scale") {
		t.Errorf("scale hint = %q, want a patch of spec.numWorkers", hint)
	}
}

// A job of kubeflow's form stored without the webhook whose runPolicy.schedulingPolicy says
// otherwise than spec.schedulingPolicy is not run as either says: the engine refuses it, naming
// both fields.
func TestKubeflowSchedulingClashIsRefused(t *testing.T) {
	job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ml"}, Spec: troupev1.MPIJobSpec{
		MPIReplicaSpecs: &troupev1.MPIReplicaSpecs{Launcher: &troupev1.ReplicaSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "launcher", Image: "mpi:1"}}},
		}}},
		MPIProgramSpec: troupev1.MPIProgramSpec{
			RunPolicy:        troupev1.RunPolicy{SchedulingPolicy: &troupev1.KubeflowSchedulingPolicy{Queue: "a"}},
			SchedulingPolicy: troupev1.SchedulingPolicy{Queue: "b"},
		},
	}}
	err := (MPIJob{}).Describe(job, &engine.Spec{})
	if err == nil || !strings.Contains(err.Error(), `spec.runPolicy.schedulingPolicy.queue: Invalid value: "a": contradicts spec.schedulingPolicy.queue (b)`) {
		t.Errorf("Describe = %v, want the contradiction named", err)
	}
	job.Spec.SchedulingPolicy.Queue = ""
	if err := (MPIJob{}).Describe(job, &engine.Spec{}); err != nil {
		t.Errorf("runPolicy.schedulingPolicy alone: %v", err)
	}
}
