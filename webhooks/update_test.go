package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A job created while the webhook was down is stored without the webhook's defaults (only the
// CRD's). Its first update through the webhook gets them, and that must not read as a change of
// what is fixed once the job exists: labelling or scaling such a job is allowed.
func TestUpdateOfAJobStoredWithoutDefaults(t *testing.T) {
	o := Options{DefaultGang: troupev1.GangVolcano}
	meta := metav1.ObjectMeta{Name: "j", Namespace: "ns"}
	worker := troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:1"}}}}}
	hvd := *worker.DeepCopy()
	hvd.Template.Spec.Containers[0].Name = troupev1.HorovodMainContainer

	t.Run("ChainerJob", func(t *testing.T) {
		stored := &troupev1.ChainerJob{ObjectMeta: meta, Spec: troupev1.ChainerJobSpec{Backend: troupev1.ChainerBackendMPI,
			Master:     troupev1.ChainerMaster{Template: chainerTemplate(0)},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{"ws0": {Replicas: ptr.To[int32](1), Template: chainerTemplate(0)}}}}
		updated := stored.DeepCopy()
		updated.Labels = map[string]string{"team": "a"}
		ws := updated.Spec.WorkerSets["ws0"]
		ws.Replicas = ptr.To[int32](3)
		updated.Spec.WorkerSets["ws0"] = ws
		updated.SetDefaults(o.Defaults())
		if _, err := (ChainerJob{o}).ValidateUpdate(context.Background(), stored, updated); err != nil {
			t.Error(err)
		}
	})
	t.Run("MPIJob", func(t *testing.T) {
		stored := &troupev1.MPIJob{ObjectMeta: meta, Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{Worker: *worker.DeepCopy()}}}
		updated := stored.DeepCopy()
		updated.Spec.Worker.Replicas = ptr.To[int32](4)
		updated.SetDefaults(o.Defaults())
		if _, err := (MPIJob{o}).ValidateUpdate(context.Background(), stored, updated); err != nil {
			t.Error(err)
		}
	})
	t.Run("HorovodJob", func(t *testing.T) {
		stored := &troupev1.HorovodJob{ObjectMeta: meta, Spec: troupev1.HorovodJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{Worker: hvd}}}
		updated := stored.DeepCopy()
		updated.Labels = map[string]string{"team": "a"}
		updated.SetDefaults(o.Defaults())
		if _, err := (HorovodJob{o}).ValidateUpdate(context.Background(), stored, updated); err != nil {
			t.Error(err)
		}
	})
}

// Kueue admits a workload in one update: it sets the placement (nodeSelector, tolerations) of
// the suspended job's templates and clears suspend. That update is admitted, because the stored
// job was suspended; changing anything else, or placing a job that was not suspended, is not.
func TestPlaceAndUnsuspendInOneUpdate(t *testing.T) {
	o := Options{DefaultGang: troupev1.GangNone}
	meta := metav1.ObjectMeta{Name: "j", Namespace: "ns"}
	place := func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.NodeSelector = map[string]string{"pool": "a"}
		tmpl.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	}
	chainer := func(suspend bool) *troupev1.ChainerJob {
		j := &troupev1.ChainerJob{ObjectMeta: meta, Spec: troupev1.ChainerJobSpec{Backend: troupev1.ChainerBackendMPI,
			Master:     troupev1.ChainerMaster{Template: chainerTemplate(0)},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{"ws0": {Replicas: ptr.To[int32](1), Template: chainerTemplate(0)}}}}
		j.Spec.RunPolicy.Suspend = ptr.To(suspend)
		j.SetDefaults(o.Defaults())
		return j
	}
	admit := func(stored *troupev1.ChainerJob, edit func(*troupev1.ChainerJob)) error {
		updated := stored.DeepCopy()
		edit(updated)
		updated.Spec.RunPolicy.Suspend = ptr.To(false)
		_, err := (ChainerJob{o}).ValidateUpdate(context.Background(), stored, updated)
		return err
	}
	placeAll := func(j *troupev1.ChainerJob) {
		place(&j.Spec.Master.Template)
		ws := j.Spec.WorkerSets["ws0"]
		place(&ws.Template)
		j.Spec.WorkerSets["ws0"] = ws
	}
	if err := admit(chainer(true), placeAll); err != nil {
		t.Errorf("ChainerJob placed and resumed in one update: %v", err)
	}
	if err := admit(chainer(false), placeAll); err == nil {
		t.Error("a running ChainerJob's placement changed: admitted")
	}
	if err := admit(chainer(true), func(j *troupev1.ChainerJob) { j.Spec.Master.Template.Spec.Containers[0].Image = "other:2" }); err == nil {
		t.Error("a suspended ChainerJob's image changed while resuming: admitted")
	}

	mpiJob := &troupev1.MPIJob{ObjectMeta: meta, Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
		Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:1"}}}}}}}}
	mpiJob.Spec.RunPolicy.Suspend = ptr.To(true)
	mpiJob.SetDefaults(o.Defaults())
	updated := mpiJob.DeepCopy()
	place(&updated.Spec.Worker.Template)
	updated.Spec.RunPolicy.Suspend = ptr.To(false)
	if _, err := (MPIJob{o}).ValidateUpdate(context.Background(), mpiJob, updated); err != nil {
		t.Errorf("MPIJob placed and resumed in one update: %v", err)
	}
}

// runPolicy.failurePolicy is fixed once the job exists: its pods carry their restart attempt.
func TestFailurePolicyCannotChange(t *testing.T) {
	o := Options{DefaultGang: troupev1.GangNone}
	stored := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"}, Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
		Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:1"}}}}},
		RunPolicy: troupev1.RunPolicy{FailurePolicy: &troupev1.FailurePolicy{MaxRestarts: 1}},
	}}}
	stored.SetDefaults(o.Defaults())
	for name, edit := range map[string]func(*troupev1.RunPolicy){
		"maxRestarts changed": func(rp *troupev1.RunPolicy) { rp.FailurePolicy.MaxRestarts = 3 },
		"removed":             func(rp *troupev1.RunPolicy) { rp.FailurePolicy = nil },
	} {
		updated := stored.DeepCopy()
		edit(&updated.Spec.RunPolicy)
		_, err := (MPIJob{o}).ValidateUpdate(context.Background(), stored, updated)
		if err == nil || !strings.Contains(err.Error(), "spec.runPolicy.failurePolicy: Forbidden: cannot change once the job exists") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A template change is refused at the path of each field that changed, never at the template's:
// the user learns what to undo. Fields written differently but equal once decoded (an empty
// resources, a quantity in another unit) are no change.
func TestTemplateChangesNameTheirFields(t *testing.T) {
	p := field.NewPath("spec", "worker", "template")
	stored := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a:1",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	for _, c := range []struct {
		name      string
		suspended bool
		edit      func(*corev1.PodTemplateSpec)
		want      []string
	}{
		{"the same quantity in millicores", false, func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1000m")
		}, nil},
		{"the image", false, func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "a:2" },
			[]string{"spec.worker.template.spec.containers[0].image"}},
		{"the image and an env variable", false, func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Image = "a:2"
			t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, []string{"spec.worker.template.spec.containers[0].env", "spec.worker.template.spec.containers[0].image"}},
		{"a container added", false, func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "d", Image: "d:1"})
		}, []string{"spec.worker.template.spec.containers"}},
		{"a node selector while running", false, func(t *corev1.PodTemplateSpec) { t.Spec.NodeSelector = map[string]string{"pool": "a"} },
			[]string{"spec.worker.template.spec.nodeSelector"}},
		{"a node selector while suspended", true, func(t *corev1.PodTemplateSpec) { t.Spec.NodeSelector = map[string]string{"pool": "a"} }, nil},
		{"the image while suspended", true, func(t *corev1.PodTemplateSpec) {
			t.Spec.NodeSelector = map[string]string{"pool": "a"}
			t.Spec.Containers[0].Image = "a:2"
		}, []string{"spec.worker.template.spec.containers[0].image"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			updated := stored.DeepCopy()
			c.edit(updated)
			var got []string
			for _, e := range validateTemplateUpdate(p, &stored, updated, c.suspended) {
				if e.Type != field.ErrorTypeForbidden {
					t.Errorf("%s: %s, want Forbidden", e.Field, e.Type)
				}
				got = append(got, e.Field)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("refused at %v, want %v", got, c.want)
			}
		})
	}
}
