package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func pytorchReplica(replicas *int32, ports ...corev1.ContainerPort) *ReplicaSpec {
	return &ReplicaSpec{Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "sidecar", Image: "proxy:1"},
		{Name: PyTorchMainContainer, Image: "train:1", Ports: ports},
	}}}}
}

// kubeflow's defaults of a PyTorchJob: one pod per replica type restarting OnFailure, the
// clean-pod policy None, nprocPerNode auto, the pods' retries 6; idempotent. The containers are
// left as written (the torch backend gives the pods the port): rank 0's port is the one the
// pytorch container names pytorchjob-port, else 23456.
func TestPyTorchJobDefaults(t *testing.T) {
	j := &PyTorchJob{Spec: PyTorchJobSpec{PyTorchReplicaSpecs: PyTorchReplicaSpecs{
		Master: pytorchReplica(nil),
		Worker: pytorchReplica(ptr.To[int32](3), corev1.ContainerPort{Name: PyTorchPortName, ContainerPort: 29500}),
	}}}
	j.SetDefaults(OperatorDefaults{})
	r := j.Spec.PyTorchReplicaSpecs
	got := []any{*r.Master.Replicas, r.Master.RestartPolicy, *r.Worker.Replicas, r.Worker.RestartPolicy,
		PyTorchPort(&r.Master.Template), PyTorchPort(&r.Worker.Template), len(r.Worker.Template.Spec.Containers[1].Ports),
		len(r.Master.Template.Spec.Containers[0].Ports), *j.Spec.RunPolicy.CleanPodPolicy, *j.Spec.NprocPerNode, *j.Spec.RunPolicy.BackoffLimit}
	want := []any{int32(1), ReplicaRestartOnFailure, int32(3), ReplicaRestartOnFailure,
		int32(23456), int32(29500), 1, 0, CleanPodPolicyNone, "auto", int32(6)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	again := j.DeepCopy()
	again.SetDefaults(OperatorDefaults{})
	if diff := cmp.Diff(j, again); diff != "" {
		t.Errorf("defaulting twice changed the job:\n%s", diff)
	}
}

// The elastic bounds default from each other, else from the workers' count, as in kubeflow;
// elasticPolicy.nProcPerNode (deprecated) leaves nprocPerNode unset.
func TestPyTorchElasticDefaults(t *testing.T) {
	for name, tc := range map[string]struct {
		policy   PyTorchElasticPolicy
		min, max int32
	}{
		"max only":  {PyTorchElasticPolicy{MaxReplicas: ptr.To[int32](4)}, 4, 4},
		"min only":  {PyTorchElasticPolicy{MinReplicas: ptr.To[int32](2)}, 2, 2},
		"neither":   {PyTorchElasticPolicy{}, 3, 3},
		"both kept": {PyTorchElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5)}, 1, 5},
	} {
		j := &PyTorchJob{Spec: PyTorchJobSpec{ElasticPolicy: &tc.policy, PyTorchReplicaSpecs: PyTorchReplicaSpecs{Worker: pytorchReplica(ptr.To[int32](3))}}}
		j.SetDefaults(OperatorDefaults{})
		if e := j.Spec.ElasticPolicy; *e.MinReplicas != tc.min || *e.MaxReplicas != tc.max {
			t.Errorf("%s: bounds %d:%d, want %d:%d", name, *e.MinReplicas, *e.MaxReplicas, tc.min, tc.max)
		}
	}
	j := &PyTorchJob{Spec: PyTorchJobSpec{ElasticPolicy: &PyTorchElasticPolicy{NProcPerNode: ptr.To[int32](2)},
		PyTorchReplicaSpecs: PyTorchReplicaSpecs{Worker: pytorchReplica(nil)}}}
	j.SetDefaults(OperatorDefaults{})
	if j.Spec.NprocPerNode != nil {
		t.Errorf("nprocPerNode defaulted to %q beside elasticPolicy.nProcPerNode", *j.Spec.NprocPerNode)
	}
}
