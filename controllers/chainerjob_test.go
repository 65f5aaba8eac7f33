package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func chainerTemplate(gpus int64) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "chainer", Image: "chainermn:1"}
	if gpus > 0 {
		c.Resources.Limits = corev1.ResourceList{troupev1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func chainerJob() *troupev1.ChainerJob {
	return &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mn", Namespace: "ml", UID: "u1"},
		Spec: troupev1.ChainerJobSpec{
			Backend: troupev1.ChainerBackendMPI,
			Master:  troupev1.ChainerMaster{Template: chainerTemplate(0)},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{
				"ws0":  {Replicas: ptr.To[int32](2), Template: chainerTemplate(0)},
				"gpu":  {Replicas: ptr.To[int32](1), Template: chainerTemplate(8), MPIConfig: &troupev1.MPIConfig{Slots: ptr.To[int32](4)}},
				"gpu8": {Template: chainerTemplate(8)},
			},
		},
	}
}

func TestChainerJobDescribe(t *testing.T) {
	tests := map[string]struct {
		mutate  func(*troupev1.ChainerJob)
		want    func(*engine.Spec)
		wantErr string
	}{
		"seed shape": {},
		"run policy fills what the master leaves out": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](2)
				j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
			},
			want: func(s *engine.Spec) {
				s.Master.BackoffLimit = 2
				s.Master.ActiveDeadlineSeconds = ptr.To[int64](60)
				s.RunPolicy.BackoffLimit = ptr.To[int32](2)
				s.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
			},
		},
		"the master's own limits win": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](2)
				j.Spec.Master.BackoffLimit = ptr.To[int32](0)
				j.Spec.Master.ActiveDeadlineSeconds = ptr.To[int64](3600)
			},
			want: func(s *engine.Spec) {
				s.Master.BackoffLimit = 0
				s.Master.ActiveDeadlineSeconds = ptr.To[int64](3600)
				s.RunPolicy.BackoffLimit = ptr.To[int32](2)
			},
		},
		"backend none runs the master alone": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.Backend = troupev1.ChainerBackendNone
				j.Spec.WorkerSets = nil
			},
			want: func(s *engine.Spec) {
				s.WorkerSets, s.Backend, s.Master.PodFailurePolicy, s.RunPolicy.WorkerRestartLimit = nil, nil, nil, nil
			},
		},
		"the SSH transport with its port and sshd": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.Transport = troupev1.MPITransportSSH
				j.Spec.SSH = &troupev1.SSHConfig{SSHDPath: "/opt/sshd", Port: ptr.To[int32](2022)}
				j.Spec.WaitForWorkersTimeoutSeconds = ptr.To[int32](60)
			},
			want: func(s *engine.Spec) {
				s.Backend = mpi.Backend{Transport: mpi.SSH{Port: 2022, SSHDPath: "/opt/sshd"}, AgentImage: "agent:1", WaitTimeoutSeconds: 60}
			},
		},
		"a launcher that restarts in place gets no wait failure policy": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.Master.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			},
			want: func(s *engine.Spec) {
				s.Master.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				s.Master.PodFailurePolicy = nil
			},
		},
		"an unknown transport is refused": {
			mutate:  func(j *troupev1.ChainerJob) { j.Spec.Transport = "Telnet" },
			wantErr: `spec.transport: Unsupported value: "Telnet"`,
		},
		"backend none with workers is refused, not silently dropped": {
			mutate:  func(j *troupev1.ChainerJob) { j.Spec.Backend = troupev1.ChainerBackendNone },
			wantErr: `spec.workerSets: Forbidden: backend "none" runs the master alone`,
		},
		"a worker set without the chainer container": {
			mutate: func(j *troupev1.ChainerJob) {
				j.Spec.WorkerSets["gpu"].Template.Spec.Containers[0].Name = "main"
			},
			wantErr: `spec.workerSets[gpu].template.spec.containers: Required value: must contain a container named "chainer"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := chainerJob()
			if tc.mutate != nil {
				tc.mutate(job)
			}
			got := &engine.Spec{Name: "mn", Namespace: "ml"}
			err := ChainerJob{Options{AgentImage: "agent:1"}}.Describe(job, got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			want := &engine.Spec{
				Name: "mn", Namespace: "ml", MainContainer: "chainer",
				Master: engine.Master{
					JobName: "mn-master", Template: job.Spec.Master.Template, TemplateField: "spec.master.template",
					BackoffLimit: 6, Slots: 1, IsHost: true,
					PodFailurePolicy: mpi.WaitFailurePolicy(&job.Spec.Master.Template),
				},
				// In sorted name order, whatever order the map was written in.
				WorkerSets: []engine.WorkerSet{
					{Name: "gpu", ChildName: "mn-workerset-gpu", TemplateField: "spec.workerSets[gpu].template", Replicas: 1, Slots: 4, Template: chainerTemplate(8)},
					{Name: "gpu8", ChildName: "mn-workerset-gpu8", TemplateField: "spec.workerSets[gpu8].template", Replicas: 1, Slots: 8, Template: chainerTemplate(8)},
					{Name: "ws0", ChildName: "mn-workerset-ws0", TemplateField: "spec.workerSets[ws0].template", Replicas: 2, Slots: 1, Template: chainerTemplate(0)},
				},
				// The adapter describes the job with its defaults (SetDefaults), stored or not.
				RunPolicy: troupev1.RunPolicy{CleanPodPolicy: ptr.To(troupev1.CleanPodPolicyRunning),
					CleanPodPolicyOn:   ptr.To(troupev1.CleanPodPolicyOnFinished),
					NetworkPolicy:      &troupev1.NetworkPolicyConfig{Enabled: ptr.To(true)},
					WorkerRestartLimit: ptr.To(troupev1.DefaultWorkerRestartLimit)},
				Backend: mpi.Backend{Transport: mpi.KubeExec{}, AgentImage: "agent:1", WaitTimeoutSeconds: troupev1.DefaultWaitForWorkersTimeoutSeconds},
			}
			if tc.want != nil {
				tc.want(want)
			}
			// Scale hints have a test of their own (openmpi_test.go).
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(engine.WorkerSet{}, "ScaleHint")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}
