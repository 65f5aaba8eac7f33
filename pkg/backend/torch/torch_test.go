package torch

import (
	"strconv"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/troupe-dev/troupe/pkg/engine"
)

func torchSpec(master bool) *engine.Spec {
	s := &engine.Spec{Name: "digits", Namespace: "ml",
		WorkerSets: []engine.WorkerSet{{Name: "Worker", ChildName: "digits-worker", Replicas: 3}}}
	if master {
		s.Master = engine.Master{JobName: "digits-master"}
	}
	return s
}

func template(env ...corev1.EnvVar) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: MainContainer, Env: env}}}}
}

// envOf is a container's environment by name.
func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// With a Master, rank 0 is the master's pod and the workers' ranks follow theirs by index;
// every pod learns where rank 0 listens, the world size, and kubeflow's labels; the pytorch
// container gets the port by kubeflow's name.
func TestRanksAndRendezvousWithAMaster(t *testing.T) {
	s := torchSpec(true)
	b := Backend{Port: 23456}
	master := template()
	b.DecoratePod(s, nil, master)
	got := envOf(master.Spec.Containers[0])
	for k, v := range map[string]string{EnvMasterAddr: "digits-master.digits.ml.svc", EnvMasterPort: "23456",
		EnvWorldSize: "4", EnvPETNNodes: "4", EnvRank: "0", EnvPETNodeRank: "0"} {
		if got[k] != v {
			t.Errorf("master %s = %q, want %q", k, got[k], v)
		}
	}
	if master.Labels[LabelReplicaType] != "master" || master.Labels[LabelReplicaIndex] != "0" || master.Labels[LabelJobName] != "digits" {
		t.Errorf("master labels %v", master.Labels)
	}
	if p := master.Spec.Containers[0].Ports; len(p) != 1 || p[0].Name != PortName || p[0].ContainerPort != 23456 {
		t.Errorf("master ports %v", p)
	}
	ws := &s.WorkerSets[0]
	for i := range ws.Replicas {
		w := template()
		b.DecoratePod(s, ws, w)
		b.DecorateIndexedPod(s, ws, i, w)
		env := envOf(w.Spec.Containers[0])
		if want := strconv.Itoa(int(i) + 1); env[EnvRank] != want || env[EnvPETNodeRank] != want {
			t.Errorf("worker %d: RANK %q, PET_NODE_RANK %q, want %s", i, env[EnvRank], env[EnvPETNodeRank], want)
		}
		if env[EnvMasterAddr] != "digits-master.digits.ml.svc" || env[EnvWorldSize] != "4" {
			t.Errorf("worker %d: MASTER_ADDR %q, WORLD_SIZE %q", i, env[EnvMasterAddr], env[EnvWorldSize])
		}
		if w.Labels[LabelReplicaType] != "worker" || w.Labels[LabelReplicaIndex] != strconv.Itoa(int(i)) {
			t.Errorf("worker %d labels %v", i, w.Labels)
		}
	}
}

// Without a Master, rank 0 is the first worker; processes per node multiply the world size; a
// variable the user set is kept.
func TestRanksWithoutAMaster(t *testing.T) {
	s := torchSpec(false)
	b := Backend{Port: 29500, NprocPerNode: "2"}
	ws := &s.WorkerSets[0]
	w := template(corev1.EnvVar{Name: EnvMasterPort, Value: "1234"})
	b.DecoratePod(s, ws, w)
	b.DecorateIndexedPod(s, ws, 0, w)
	env := envOf(w.Spec.Containers[0])
	for k, v := range map[string]string{EnvMasterAddr: "digits-worker-0.digits.ml.svc", EnvMasterPort: "1234",
		EnvWorldSize: "6", EnvPETNNodes: "3", EnvPETNprocPerNode: "2", EnvRank: "0"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

// An elastic job leaves WORLD_SIZE and the ranks to torchrun: every pod gets the rendezvous
// (the first worker's host and the job's port, the node bounds), and with the c10d rendezvous
// troupe places, only the first worker is told it hosts the store.
func TestElasticRendezvous(t *testing.T) {
	s := torchSpec(false)
	b := Backend{Port: 29400, Elastic: &Elastic{MinReplicas: 1, MaxReplicas: 4, RDZVBackend: "c10d", RDZVID: "run-1"}}
	ws := &s.WorkerSets[0]
	for i, host := range []string{"is_host=true", "is_host=false"} {
		w := template()
		b.DecoratePod(s, ws, w)
		b.DecorateIndexedPod(s, ws, int32(i), w)
		env := envOf(w.Spec.Containers[0])
		for k, v := range map[string]string{EnvPETRDZVEndpoint: "digits-worker-0.digits.ml.svc:29400", EnvPETRDZVBackend: "c10d",
			EnvPETNNodes: "1:4", EnvPETRDZVID: "run-1", EnvPETRDZVConf: host} {
			if env[k] != v {
				t.Errorf("worker %d: %s = %q, want %q", i, k, env[k], v)
			}
		}
		if _, ok := env[EnvWorldSize]; ok {
			t.Errorf("worker %d: WORLD_SIZE set for an elastic job", i)
		}
		if _, ok := env[EnvRank]; ok {
			t.Errorf("worker %d: RANK set for an elastic job", i)
		}
	}
}

// An elastic job with metrics gets a HorizontalPodAutoscaler named like it, on its scale
// subresource, between its bounds; without metrics, or not elastic, none.
func TestAutoscalerOfElasticMetrics(t *testing.T) {
	s := torchSpec(false)
	s.Owner = metav1.OwnerReference{APIVersion: "troupe.dev/v1alpha1", Kind: "PyTorchJob", Name: "digits", UID: "u"}
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}
	if objs := (Backend{Elastic: &Elastic{MinReplicas: 1, MaxReplicas: 3}}).Objects(s); len(objs) != 0 {
		t.Fatalf("elastic without metrics: %v", objs)
	}
	if objs := (Backend{}).Objects(s); len(objs) != 0 {
		t.Fatalf("not elastic: %v", objs)
	}
	objs := Backend{Elastic: &Elastic{MinReplicas: 1, MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpu}}}.Objects(s)
	if len(objs) != 1 {
		t.Fatalf("objects %v, want the autoscaler", objs)
	}
	hpa := objs[0].(*autoscalingv2.HorizontalPodAutoscaler)
	want := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "troupe.dev/v1alpha1", Kind: "PyTorchJob", Name: "digits"},
		MinReplicas:    ptr.To[int32](1), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{cpu},
	}
	if hpa.Name != "digits" || !equality.Semantic.DeepEqual(hpa.Spec, want) {
		t.Errorf("autoscaler %s: %+v, want %+v", hpa.Name, hpa.Spec, want)
	}
}
