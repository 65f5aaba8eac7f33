package mpi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func template(containers ...string) corev1.PodTemplateSpec {
	var t corev1.PodTemplateSpec
	for _, c := range containers {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: c, Image: "img"})
	}
	return t
}

func spec() *engine.Spec {
	return &engine.Spec{
		Name: "mn", Namespace: "ml",
		Master: engine.Master{JobName: "mn-master", Slots: 1, IsHost: true},
		WorkerSets: []engine.WorkerSet{
			{Name: "ws0", ChildName: "mn-workerset-ws0", Replicas: 2, Slots: 1},
			{Name: "gpu", ChildName: "mn-workerset-gpu", Replicas: 1, Slots: 4},
		},
	}
}

func TestHostfile(t *testing.T) {
	tests := map[string]struct {
		mutate func(*engine.Spec)
		want   string
	}{
		"master is rank 0, then every worker in order": {
			want: "mn-master.mn.ml.svc slots=1\n" +
				"mn-workerset-ws0-0.mn.ml.svc slots=1\n" +
				"mn-workerset-ws0-1.mn.ml.svc slots=1\n" +
				"mn-workerset-gpu-0.mn.ml.svc slots=4\n",
		},
		"a launcher-only master is not a host": {
			mutate: func(s *engine.Spec) { s.Master.IsHost = false },
			want: "mn-workerset-ws0-0.mn.ml.svc slots=1\n" +
				"mn-workerset-ws0-1.mn.ml.svc slots=1\n" +
				"mn-workerset-gpu-0.mn.ml.svc slots=4\n",
		},
		"master alone": {
			mutate: func(s *engine.Spec) { s.WorkerSets = nil; s.Master.Slots = 2 },
			want:   "mn-master.mn.ml.svc slots=2\n",
		},
		"an empty worker set adds no host": {
			mutate: func(s *engine.Spec) { s.WorkerSets[1].Replicas = 0 },
			want: "mn-master.mn.ml.svc slots=1\n" +
				"mn-workerset-ws0-0.mn.ml.svc slots=1\n" +
				"mn-workerset-ws0-1.mn.ml.svc slots=1\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := spec()
			if tc.mutate != nil {
				tc.mutate(s)
			}
			if diff := cmp.Diff(tc.want, Backend{}.Hostfile(s)); diff != "" {
				t.Errorf("Hostfile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObjects(t *testing.T) {
	s := spec()
	want := []client.Object{&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "mn-mpi"},
		Data:       map[string]string{"hostfile": Backend{}.Hostfile(s)},
	}}
	if diff := cmp.Diff(want, Backend{}.Objects(s)); diff != "" {
		t.Errorf("Objects (-want +got):\n%s", diff)
	}
}

func TestDecoratePod(t *testing.T) {
	tmpl := template("chainer", "sidecar")
	Backend{}.DecoratePod(spec(), nil, &tmpl)
	mount := corev1.VolumeMount{Name: "troupe-mpi-config", MountPath: "/etc/troupe/mpi", ReadOnly: true}
	env := []corev1.EnvVar{
		{Name: "TROUPE_HOSTFILE", Value: "/etc/troupe/mpi/hostfile"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/troupe/mpi/hostfile"},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
	}
	want := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{
			Name: "troupe-mpi-config",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "mn-mpi"},
				DefaultMode:          ptr.To[int32](0o555),
			}},
		}},
		Containers: []corev1.Container{
			{Name: "chainer", Image: "img", VolumeMounts: []corev1.VolumeMount{mount}, Env: env},
			{Name: "sidecar", Image: "img", VolumeMounts: []corev1.VolumeMount{mount}, Env: env},
		},
	}}
	if diff := cmp.Diff(want, tmpl); diff != "" {
		t.Errorf("DecoratePod (-want +got):\n%s", diff)
	}
}

// A launcher container that chose its termination message policy keeps it; workers are left
// alone.
func TestDecoratePodKeepsMessagePolicy(t *testing.T) {
	tmpl := template("chainer")
	tmpl.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	Backend{}.DecoratePod(spec(), nil, &tmpl)
	if got := tmpl.Spec.Containers[0].TerminationMessagePolicy; got != corev1.TerminationMessageReadFile {
		t.Errorf("launcher's policy %q, want the template's File", got)
	}
	s := spec()
	worker := template("chainer")
	Backend{}.DecoratePod(s, &s.WorkerSets[0], &worker)
	if got := worker.Spec.Containers[0].TerminationMessagePolicy; got != "" {
		t.Errorf("worker's policy %q, want it unset", got)
	}
}

func TestSlots(t *testing.T) {
	withGPUs := func(container string, n int64) corev1.PodTemplateSpec {
		t := template("sidecar", container)
		t.Spec.Containers[1].Resources.Limits = corev1.ResourceList{troupev1.ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
		return t
	}
	tests := map[string]struct {
		tmpl     corev1.PodTemplateSpec
		override *int32
		want     int32
	}{
		"no GPU: one slot":                   {tmpl: template("chainer"), want: 1},
		"GPU limit of the main container":    {tmpl: withGPUs("chainer", 4), want: 4},
		"GPUs of another container ignored":  {tmpl: withGPUs("other", 4), want: 1},
		"mpiConfig.slots wins over the GPUs": {tmpl: withGPUs("chainer", 4), override: ptr.To[int32](2), want: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Slots(&tc.tmpl, "chainer", tc.override); got != tc.want {
				t.Errorf("Slots = %d, want %d", got, tc.want)
			}
		})
	}
}
