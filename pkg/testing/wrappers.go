// Package testing has fluent builders for test objects, so a test states only what it is
// about: MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Obj().
package testing

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// ChainerJobWrapper builds a ChainerJob.
type ChainerJobWrapper struct{ troupev1.ChainerJob }

// ChainerTemplate is a pod template with the "chainer" container and the given image.
func ChainerTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: troupev1.ChainerMainContainer, Image: image,
	}}}}
}

// MakeChainerJob returns a ChainerJob with a master and no worker sets.
func MakeChainerJob(name, ns string) *ChainerJobWrapper {
	return &ChainerJobWrapper{troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: troupev1.ChainerJobSpec{
			Backend: troupev1.ChainerBackendMPI,
			Master:  troupev1.ChainerMaster{Template: ChainerTemplate("chainer:test")},
		},
	}}
}

// Load reads a manifest (for example one of examples/) strictly into obj: a field the type does
// not know is an error, so an example cannot drift from the API. A non-empty ns replaces the
// manifest's namespace.
func Load[T interface {
	*E
	SetNamespace(string)
}, E any](t interface {
	Helper()
	Fatalf(string, ...any)
}, path, ns string) T {
	t.Helper()
	obj := T(new(E))
	if err := readStrict(path, obj); err != nil {
		t.Fatalf("%v", err)
	}
	if ns != "" {
		obj.SetNamespace(ns)
	}
	return obj
}

// LoadChainerJob reads a ChainerJob manifest (for example one of examples/) into a wrapper.
func LoadChainerJob(path, ns string) (*ChainerJobWrapper, error) {
	w := &ChainerJobWrapper{}
	if err := readStrict(path, &w.ChainerJob); err != nil {
		return nil, err
	}
	w.Namespace = ns
	return w, nil
}

// readStrict reads a manifest into obj; a field obj's type does not know is an error.
func readStrict(path string, obj any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return fmt.Errorf("%s does not fit %T: %w", path, obj, err)
	}
	return nil
}

// WorkerSet adds a worker set of replicas pods.
func (w *ChainerJobWrapper) WorkerSet(name string, replicas int32) *ChainerJobWrapper {
	if w.Spec.WorkerSets == nil {
		w.Spec.WorkerSets = map[string]troupev1.ChainerWorkerSet{}
	}
	w.Spec.WorkerSets[name] = troupev1.ChainerWorkerSet{Replicas: ptr.To(replicas), Template: ChainerTemplate("chainer:test")}
	return w
}

// Name renames the job.
func (w *ChainerJobWrapper) Name(name string) *ChainerJobWrapper {
	w.ObjectMeta.Name = name
	return w
}

// BackoffLimit sets the master's retries.
func (w *ChainerJobWrapper) BackoffLimit(n int32) *ChainerJobWrapper {
	w.Spec.Master.BackoffLimit = ptr.To(n)
	return w
}

// CleanPodPolicy sets the run policy's clean-pod policy.
func (w *ChainerJobWrapper) CleanPodPolicy(p troupev1.CleanPodPolicy) *ChainerJobWrapper {
	w.Spec.RunPolicy.CleanPodPolicy = ptr.To(p)
	return w
}

// Suspend sets runPolicy.suspend.
func (w *ChainerJobWrapper) Suspend(s bool) *ChainerJobWrapper {
	w.Spec.RunPolicy.Suspend = ptr.To(s)
	return w
}

// TTL sets runPolicy.ttlSecondsAfterFinished.
func (w *ChainerJobWrapper) TTL(seconds int32) *ChainerJobWrapper {
	w.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// Obj returns the built ChainerJob.
func (w *ChainerJobWrapper) Obj() *troupev1.ChainerJob { return w.DeepCopy() }

// EditWorkerSet changes the worker set name of job in place (map values cannot be addressed).
func EditWorkerSet(job *troupev1.ChainerJob, name string, edit func(*troupev1.ChainerWorkerSet)) {
	ws := job.Spec.WorkerSets[name]
	edit(&ws)
	job.Spec.WorkerSets[name] = ws
}
