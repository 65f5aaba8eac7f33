package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
