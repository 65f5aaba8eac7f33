package engine

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

const testNameLabel = "testjob.troupe.dev/name"

var testOwner = metav1.OwnerReference{
	APIVersion: "troupe.dev/v1alpha1", Kind: "TestJob", Name: "train", UID: "uid-1",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
}

// noHash drops the spec-hash and template-hash annotations before objects are compared; their
// behaviour has tests of its own.
func noHash[T client.Object](o T) T {
	ann := o.GetAnnotations()
	delete(ann, troupev1.AnnotationSpecHash)
	delete(ann, troupev1.AnnotationTemplateHash)
	delete(ann, troupev1.AnnotationSetTemplateHash)
	delete(ann, troupev1.AnnotationIndexedTemplateHash)
	if len(ann) == 0 {
		ann = nil
	}
	o.SetAnnotations(ann)
	return o
}

func podTemplate(container string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "train:1"}}},
	}
}

// testSpec is a job with a master and two heterogeneous worker sets.
func testSpec() *Spec {
	return &Spec{
		Name: "train", Namespace: "ml", Owner: testOwner, NameLabel: testNameLabel,
		Master: Master{
			JobName: "train-master", Template: podTemplate("main"), BackoffLimit: 3,
			ActiveDeadlineSeconds: ptr.To[int64](600), Slots: 1, IsHost: true,
		},
		WorkerSets: []WorkerSet{
			{Name: "cpu", ChildName: "train-workerset-cpu", Replicas: 2, Slots: 1, Template: podTemplate("main")},
			{Name: "gpu", ChildName: "train-workerset-gpu", Replicas: 1, Slots: 4, Template: podTemplate("main")},
		},
	}
}

// envBackend is a minimal backend: one ConfigMap and an env var naming the pod's set.
type envBackend struct{}

func (envBackend) Objects(s *Spec) []client.Object {
	return []client.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-wiring", Labels: map[string]string{"extra": "yes"}},
		Data:       map[string]string{"hosts": "n"},
	}}
}

func (envBackend) DecoratePod(_ *Spec, ws *WorkerSet, tmpl *corev1.PodTemplateSpec) {
	set := "master"
	if ws != nil {
		set = ws.Name
	}
	tmpl.Spec.Containers[0].Env = append(tmpl.Spec.Containers[0].Env, corev1.EnvVar{Name: "SET", Value: set})
}

func TestBuildService(t *testing.T) {
	want := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train", Namespace: "ml",
			Labels:          map[string]string{testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1"},
			OwnerReferences: []metav1.OwnerReference{testOwner},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                "None",
			Selector:                 map[string]string{troupev1.LabelJobUID: "uid-1"},
			PublishNotReadyAddresses: true,
		},
	}
	if diff := cmp.Diff(want, noHash(BuildService(testSpec()))); diff != "" {
		t.Errorf("BuildService (-want +got):\n%s", diff)
	}
}

func TestBuildMasterJob(t *testing.T) {
	masterLabels := map[string]string{
		testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: "master",
	}
	podLabels := map[string]string{
		"team": "vision", testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: "master",
	}
	base := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-master", Namespace: "ml", Labels: masterLabels,
			OwnerReferences: []metav1.OwnerReference{testOwner},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](3), ActiveDeadlineSeconds: ptr.To[int64](600),
			Suspend:              ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.Failed),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Hostname: "train-master", Subdomain: "train",
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "train:1", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}},
				},
			},
		},
	}
	tests := map[string]struct {
		mutate func(*Spec)
		want   func(*batchv1.Job)
	}{
		"plain": {},
		"suspended": {
			mutate: func(s *Spec) { s.RunPolicy.Suspend = ptr.To(true) },
			want:   func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) },
		},
		"user restart policy and priority class from the scheduling policy": {
			mutate: func(s *Spec) {
				s.Master.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				s.SchedulingPolicy.PriorityClassName = "high"
			},
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				j.Spec.Template.Spec.PriorityClassName = "high"
			},
		},
		"our labels win over the user's": {
			mutate: func(s *Spec) { s.Master.Template.Labels[troupev1.LabelRole] = "boss" },
		},
		"backend decorates the pod": {
			mutate: func(s *Spec) { s.Backend = envBackend{} },
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SET", Value: "master"}}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			if tc.mutate != nil {
				tc.mutate(s)
			}
			want := base.DeepCopy()
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, noHash(BuildMasterJob(s))); diff != "" {
				t.Errorf("BuildMasterJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildWorkerStatefulSet(t *testing.T) {
	labels := map[string]string{
		testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1",
		troupev1.LabelRole: "worker", troupev1.LabelWorkerSet: "gpu",
	}
	podLabels := map[string]string{"team": "vision"}
	for k, v := range labels {
		podLabels[k] = v
	}
	// The selector of StatefulSets made before the job-name label existed, which cannot change.
	selector := maps.Clone(labels)
	delete(selector, troupev1.LabelJobName)
	want := func(replicas int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "train-workerset-gpu", Namespace: "ml", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{testOwner},
			},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To(replicas),
				ServiceName:         "train",
				PodManagementPolicy: appsv1.ParallelPodManagement,
				UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
				Selector:            &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyAlways,
						Containers:    []corev1.Container{{Name: "main", Image: "train:1", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}},
					},
				},
			},
		}
	}
	s := testSpec()
	if diff := cmp.Diff(want(1), noHash(BuildWorkerStatefulSet(s, &s.WorkerSets[1], false))); diff != "" {
		t.Errorf("running workers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want(0), noHash(BuildWorkerStatefulSet(s, &s.WorkerSets[1], true))); diff != "" {
		t.Errorf("released workers (-want +got):\n%s", diff)
	}
}

func TestBuildBackendObjects(t *testing.T) {
	s := testSpec()
	if got := buildBackendObjects(s); len(got) != 0 {
		t.Errorf("no backend: got %d objects, want none", len(got))
	}
	s.Backend = envBackend{}
	want := []client.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-wiring", Namespace: "ml",
			Labels:          map[string]string{"extra": "yes", testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1"},
			OwnerReferences: []metav1.OwnerReference{testOwner},
		},
		Data: map[string]string{"hosts": "n"},
	}}
	got := buildBackendObjects(s)
	for _, o := range got {
		noHash(o)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buildBackendObjects (-want +got):\n%s", diff)
	}
}

func TestChildrenOrder(t *testing.T) {
	s := testSpec()
	s.Backend = envBackend{}
	var got []string
	for _, o := range Children(s, false) {
		got = append(got, keyOf(o).Kind+"/"+o.GetName())
	}
	want := []string{
		"Service/train", "ConfigMap/train-wiring", "NetworkPolicy/train",
		"StatefulSet/train-workerset-cpu", "StatefulSet/train-workerset-gpu",
		"Job/train-master",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Children order (-want +got):\n%s", diff)
	}
}

// Every child carries the managed-by label the operator's caches select by, and the label is
// not part of the spec hash: children of an older release get it without their StatefulSet's
// template being rewritten.
func TestChildrenAreMarkedManaged(t *testing.T) {
	s := testSpec()
	s.Backend = envBackend{}
	for _, o := range Children(s, false) {
		if got := o.GetLabels()[troupev1.LabelManagedBy]; got != troupev1.ManagedByTroupe {
			t.Errorf("%s %s: %s = %q, want %q", keyOf(o).Kind, o.GetName(), troupev1.LabelManagedBy, got, troupev1.ManagedByTroupe)
		}
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			if _, leaked := sts.Spec.Template.Labels[troupev1.LabelManagedBy]; leaked {
				t.Errorf("StatefulSet %s: the managed-by label reached the pod template", sts.Name)
			}
			plain := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
			if plain.Name == sts.Name && plain.Annotations[troupev1.AnnotationSpecHash] != sts.Annotations[troupev1.AnnotationSpecHash] {
				t.Errorf("StatefulSet %s: the managed-by label changed the spec hash", sts.Name)
			}
		}
	}
}

func TestSpecHash(t *testing.T) {
	s := testSpec()
	hash := func(o client.Object) string { return o.GetAnnotations()[troupev1.AnnotationSpecHash] }
	a, b := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false), BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	if hash(a) == "" || hash(a) != hash(b) {
		t.Errorf("equal objects: hashes %q and %q, want equal and set", hash(a), hash(b))
	}
	if released := BuildWorkerStatefulSet(s, &s.WorkerSets[0], true); hash(released) == hash(a) {
		t.Errorf("scaling to zero kept the hash %q", hash(a))
	}
	s.WorkerSets[0].Template.Spec.Containers[0].Image = "train:2"
	if changed := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false); hash(changed) == hash(a) {
		t.Errorf("a new image kept the hash %q", hash(a))
	}
}

func TestHostNames(t *testing.T) {
	s := testSpec()
	if got, want := s.HostName(s.MasterHostname()), "train-master.train.ml.svc"; got != want {
		t.Errorf("master host = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"train-workerset-cpu-0", "train-workerset-cpu-1"}, s.WorkerSets[0].WorkerHostnames()); diff != "" {
		t.Errorf("worker hostnames (-want +got):\n%s", diff)
	}
	if got := s.TotalWorkers(); got != 3 {
		t.Errorf("TotalWorkers = %d, want 3", got)
	}
}
