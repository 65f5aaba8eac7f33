package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// runPolicy.workerRestartLimit defaults to 3 for every job whose workers must all run, and to no
// limit for an elastic HorovodJob (it trains on with the workers that run) and a ChainerJob of
// backend none (no workers).
func TestWorkerRestartLimitDefaults(t *testing.T) {
	limit := func(rp RunPolicy) string {
		if rp.WorkerRestartLimit == nil {
			return "none"
		}
		if *rp.WorkerRestartLimit == DefaultWorkerRestartLimit {
			return "default"
		}
		return "other"
	}
	chainer := &ChainerJob{}
	chainer.SetDefaults(OperatorDefaults{})
	solo := &ChainerJob{Spec: ChainerJobSpec{Backend: ChainerBackendNone}}
	solo.SetDefaults(OperatorDefaults{})
	mpi := &MPIJob{}
	mpi.SetDefaults(OperatorDefaults{})
	ffffaraway := &MPIJob{Spec: MPIJobSpec{WorkerTemplate: &corev1.PodTemplateSpec{}}}
	ffffaraway.SetDefaults(OperatorDefaults{})
	horovod := &HorovodJob{}
	horovod.SetDefaults(OperatorDefaults{})
	elastic := &HorovodJob{Spec: HorovodJobSpec{Elastic: &HorovodElastic{MinReplicas: 1, MaxReplicas: 4}}}
	elastic.SetDefaults(OperatorDefaults{})
	kept := &MPIJob{}
	seven := int32(7)
	kept.Spec.RunPolicy.WorkerRestartLimit = &seven
	kept.SetDefaults(OperatorDefaults{})

	for name, got := range map[string]string{
		"ChainerJob": limit(chainer.Spec.RunPolicy), "ChainerJob of backend none": limit(solo.Spec.RunPolicy),
		"MPIJob": limit(mpi.Spec.RunPolicy), "MPIJob of the FFFFFaraway form": limit(ffffaraway.Spec.RunPolicy),
		"HorovodJob": limit(horovod.Spec.RunPolicy), "elastic HorovodJob": limit(elastic.Spec.RunPolicy),
		"a limit the user set": limit(kept.Spec.RunPolicy),
	} {
		want := map[string]string{"ChainerJob of backend none": "none", "elastic HorovodJob": "none", "a limit the user set": "other"}[name]
		if want == "" {
			want = "default"
		}
		if got != want {
			t.Errorf("%s: workerRestartLimit %s, want %s", name, got, want)
		}
	}
}

// A pod's default slots are its main container's accelerators, whoever makes them; other
// extended resources (a NIC, hugepages) are not ranks.
func TestSlotsFromAnyAccelerator(t *testing.T) {
	pod := func(limits corev1.ResourceList) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")}}},
			{Name: "main", Resources: corev1.ResourceRequirements{Limits: limits}},
		}}}
	}
	tests := map[string]struct {
		limits corev1.ResourceList
		want   int32
	}{
		"no limit":              {nil, 1},
		"NVIDIA":                {corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}, 4},
		"AMD":                   {corev1.ResourceList{"amd.com/gpu": resource.MustParse("8")}, 8},
		"Intel GPU":             {corev1.ResourceList{"gpu.intel.com/xe": resource.MustParse("2")}, 2},
		"Habana Gaudi":          {corev1.ResourceList{"habana.ai/gaudi": resource.MustParse("8")}, 8},
		"AWS Neuron":            {corev1.ResourceList{"aws.amazon.com/neuron": resource.MustParse("16")}, 16},
		"Google TPU":            {corev1.ResourceList{"google.com/tpu": resource.MustParse("4")}, 4},
		"an NVIDIA MIG slice":   {corev1.ResourceList{"nvidia.com/mig-1g.5gb": resource.MustParse("3")}, 3},
		"a NIC is not a rank":   {corev1.ResourceList{"rdma/hca_shared_devices_a": resource.MustParse("1"), "cpu": resource.MustParse("16")}, 1},
		"hugepages are not":     {corev1.ResourceList{"hugepages-2Mi": resource.MustParse("1Gi")}, 1},
		"the largest of two":    {corev1.ResourceList{"amd.com/gpu": resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("6")}, 6},
		"a sidecar's GPUs only": {corev1.ResourceList{"memory": resource.MustParse("1Gi")}, 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SlotsFromTemplate(pod(tt.limits), "main"); got != tt.want {
				t.Errorf("slots %d, want %d", got, tt.want)
			}
		})
	}
}
