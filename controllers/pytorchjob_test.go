package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/torch"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func pytorchReplica(replicas int32, restart troupev1.ReplicaRestartPolicy) *troupev1.ReplicaSpec {
	return &troupev1.ReplicaSpec{Replicas: ptr.To(replicas), RestartPolicy: restart, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: troupev1.PyTorchMainContainer, Image: "train:1", Command: []string{"python3", "train.py"}}},
	}}}
}

// describePyTorch builds a PyTorchJob's children as the engine would, with its uid.
func describePyTorch(t *testing.T, job *troupev1.PyTorchJob) (*engine.Spec, []*batchv1.Job) {
	t.Helper()
	job.UID = "uid-ptj"
	s := &engine.Spec{Name: job.Name, Namespace: job.Namespace, NameLabel: PyTorchJobNameLabel,
		Owner: *metav1.NewControllerRef(job, troupev1.GroupVersion.WithKind("PyTorchJob"))}
	if err := (PyTorchJob{}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	var jobs []*batchv1.Job
	for _, o := range engine.Children(s, false) {
		if j, ok := o.(*batchv1.Job); ok {
			jobs = append(jobs, j)
		}
	}
	return s, jobs
}

// pytorchEnv is the main container's environment of a Job's pod, by name.
func pytorchEnv(j *batchv1.Job) map[string]string {
	out := map[string]string{}
	for _, c := range j.Spec.Template.Spec.Containers {
		if c.Name == troupev1.PyTorchMainContainer {
			for _, e := range c.Env {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}

// A PyTorchJob of a Master and Workers, as training-operator runs it: the master's Job
// <name>-master (rank 0, restarting as its replica says), a Job per worker <name>-worker-<i>
// (rank i+1, run to completion), every pod told the master's address and port, the world size
// and its rank, torchrun's PET_* too, and kubeflow's labels; the Service names the port.
func TestPyTorchJobWithMaster(t *testing.T) {
	job := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml"}, Spec: troupev1.PyTorchJobSpec{
		PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{
			Master: pytorchReplica(1, troupev1.ReplicaRestartExitCode),
			Worker: pytorchReplica(2, ""),
		},
	}}
	s, jobs := describePyTorch(t, job)
	if len(jobs) != 3 || jobs[0].Name != "mnist-worker-0" || jobs[1].Name != "mnist-worker-1" || jobs[2].Name != "mnist-master" {
		t.Fatalf("Jobs %v, want mnist-worker-0, mnist-worker-1 and the master mnist-master", names(jobs))
	}
	master := jobs[2]
	wantMaster := map[string]string{
		"PYTHONUNBUFFERED": "1", torch.EnvMasterAddr: "mnist-master.mnist.ml.svc", torch.EnvMasterPort: "23456",
		torch.EnvPETMasterAddr: "mnist-master.mnist.ml.svc", torch.EnvPETMasterPort: "23456",
		torch.EnvWorldSize: "3", torch.EnvRank: "0", torch.EnvPETNodeRank: "0", torch.EnvPETNNodes: "3", torch.EnvPETNprocPerNode: "auto",
	}
	if diff := cmp.Diff(wantMaster, pytorchEnv(master)); diff != "" {
		t.Errorf("the master's environment (-want +got):\n%s", diff)
	}
	if master.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || master.Spec.PodFailurePolicy == nil {
		t.Errorf("an ExitCode master: restartPolicy %s, pod failure policy %v; want Never and one", master.Spec.Template.Spec.RestartPolicy, master.Spec.PodFailurePolicy)
	}
	for i, w := range jobs[:2] {
		e := pytorchEnv(w)
		if e[torch.EnvRank] != itoa(i+1) || e[torch.EnvPETNodeRank] != itoa(i+1) || e[torch.EnvMasterAddr] != "mnist-master.mnist.ml.svc" || e[torch.EnvWorldSize] != "3" {
			t.Errorf("worker %d: RANK %s, PET_NODE_RANK %s, MASTER_ADDR %s, WORLD_SIZE %s", i, e[torch.EnvRank], e[torch.EnvPETNodeRank], e[torch.EnvMasterAddr], e[torch.EnvWorldSize])
		}
		tmpl := w.Spec.Template
		if tmpl.Spec.Hostname != w.Name || tmpl.Spec.Subdomain != "mnist" || tmpl.Spec.RestartPolicy != corev1.RestartPolicyOnFailure ||
			ptr.Deref(w.Spec.BackoffLimit, 0) != troupev1.DefaultBackoffLimit {
			t.Errorf("worker %d: hostname %s, subdomain %s, restartPolicy %s, backoffLimit %v", i, tmpl.Spec.Hostname, tmpl.Spec.Subdomain,
				tmpl.Spec.RestartPolicy, w.Spec.BackoffLimit)
		}
		if l := tmpl.Labels; l[torch.LabelJobName] != "mnist" || l[torch.LabelReplicaType] != "worker" || l[torch.LabelReplicaIndex] != itoa(i) {
			t.Errorf("worker %d labels %v lack kubeflow's", i, l)
		}
	}
	if svc := engine.BuildService(s); len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 23456 || svc.Spec.Ports[0].Name != torch.PortName {
		t.Errorf("the Service's ports %+v, want pytorchjob-port 23456", svc.Spec.Ports)
	}
}

// Workers alone, elastic: no master, the rendezvous hosted by the first worker on its port
// (its agent told it hosts the store, the others told they do not), torchrun's node bounds, no
// fixed ranks or world size (torchrun gives them).
func TestPyTorchJobElasticWorkersAlone(t *testing.T) {
	job := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "ml"}, Spec: troupev1.PyTorchJobSpec{
		ElasticPolicy: &troupev1.PyTorchElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3),
			RDZVBackend: ptr.To(troupev1.RDZVBackendC10D), MaxRestarts: ptr.To[int32](100),
			RDZVConf: []troupev1.RDZVConf{{Key: "timeout", Value: "60"}, {Key: "join_timeout", Value: "30"}}},
		PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Worker: pytorchReplica(2, "")},
	}}
	s, jobs := describePyTorch(t, job)
	if s.HasMaster() || len(jobs) != 2 {
		t.Fatalf("a job of workers alone: master %t, Jobs %v", s.HasMaster(), names(jobs))
	}
	want := map[string]string{
		"PYTHONUNBUFFERED": "1", torch.EnvMasterAddr: "echo-worker-0.echo.ml.svc", torch.EnvMasterPort: "23456",
		torch.EnvPETMasterAddr: "echo-worker-0.echo.ml.svc", torch.EnvPETMasterPort: "23456", torch.EnvPETNprocPerNode: "auto",
		torch.EnvPETRDZVEndpoint: "echo-worker-0.echo.ml.svc:23456", torch.EnvPETRDZVBackend: "c10d", torch.EnvPETNNodes: "1:3",
		torch.EnvPETMaxRestarts: "100",
	}
	for i, j := range jobs {
		// The first worker's agent hosts the rendezvous store, and each agent is told so.
		want[torch.EnvPETRDZVConf] = "timeout=60,join_timeout=30,is_host=" + map[bool]string{true: "true", false: "false"}[i == 0]
		if diff := cmp.Diff(want, pytorchEnv(j)); diff != "" {
			t.Errorf("%s's environment (-want +got):\n%s", j.Name, diff)
		}
	}
}

// A variable the user sets in the container keeps the user's value.
func TestPyTorchUserEnvWins(t *testing.T) {
	job := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "ml"}, Spec: troupev1.PyTorchJobSpec{
		PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Master: pytorchReplica(1, "")},
	}}
	job.Spec.PyTorchReplicaSpecs.Master.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: torch.EnvMasterPort, Value: "29500"}}
	_, jobs := describePyTorch(t, job)
	if got := pytorchEnv(jobs[0])[torch.EnvMasterPort]; got != "29500" {
		t.Errorf("MASTER_PORT %s, want the user's 29500", got)
	}
}

func names(jobs []*batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

func itoa(i int) string { return string(rune('0' + i)) }

// The pods get kubeflow's port on their pytorch container (the stored spec keeps the containers
// as written); a port of that name the user gives is rank 0's and is kept.
func TestPyTorchPort(t *testing.T) {
	job := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml"}, Spec: troupev1.PyTorchJobSpec{
		PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Master: pytorchReplica(1, ""), Worker: pytorchReplica(1, "")},
	}}
	job.Spec.PyTorchReplicaSpecs.Master.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: torch.PortName, ContainerPort: 29500}}
	_, jobs := describePyTorch(t, job)
	for _, j := range jobs {
		ports := j.Spec.Template.Spec.Containers[0].Ports
		if len(ports) != 1 || ports[0].Name != torch.PortName || ports[0].ContainerPort != 29500 {
			t.Errorf("Job %s: ports %+v, want pytorchjob-port 29500", j.Name, ports)
		}
		if got := pytorchEnv(j)[torch.EnvMasterPort]; got != "29500" {
			t.Errorf("Job %s: MASTER_PORT %s, want 29500", j.Name, got)
		}
	}
	if ports := job.Spec.PyTorchReplicaSpecs.Worker.Template.Spec.Containers[0].Ports; len(ports) != 0 {
		t.Errorf("the stored worker container got ports %+v", ports)
	}
}
