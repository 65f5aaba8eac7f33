package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func pytorchJob() *troupev1.PyTorchJob {
	replica := func(n int32) *troupev1.ReplicaSpec {
		return &troupev1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: troupev1.PyTorchMainContainer, Image: "train:1"}}}}}
	}
	j := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "ddp", Namespace: "ml"}, Spec: troupev1.PyTorchJobSpec{
		ElasticPolicy:       &troupev1.PyTorchElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4)},
		PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Master: replica(1), Worker: replica(2)},
	}}
	j.SetDefaults(Options{}.Defaults())
	return j
}

// What a user changes on a running PyTorchJob: the workers' count within the elastic bounds
// (kubectl scale) is taken; a template change is refused while it runs, and so are a change of
// the rendezvous (every worker was started with it), a new replica type, and workers beyond the
// bounds, each naming its field.
func TestPyTorchJobUpdates(t *testing.T) {
	w := PyTorchJob{}
	old := pytorchJob()
	if _, err := w.ValidateCreate(context.Background(), old); err != nil {
		t.Fatalf("create: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*troupev1.PyTorchJob)
		want string
	}{
		"scale within bounds": {func(j *troupev1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs.Worker.Replicas = ptr.To[int32](4) }, ""},
		"scale past bounds": {func(j *troupev1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs.Worker.Replicas = ptr.To[int32](5) },
			"spec.pytorchReplicaSpecs.Worker.replicas"},
		"template": {func(j *troupev1.PyTorchJob) {
			j.Spec.PyTorchReplicaSpecs.Worker.Template.Spec.Containers[0].Image = "train:2"
		}, "spec.pytorchReplicaSpecs.Worker.template"},
		"rendezvous":     {func(j *troupev1.PyTorchJob) { j.Spec.ElasticPolicy.MaxRestarts = ptr.To[int32](3) }, "spec.elasticPolicy"},
		"master removed": {func(j *troupev1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs.Master = nil }, "spec.pytorchReplicaSpecs.Master"},
		"a label":        {func(j *troupev1.PyTorchJob) { j.Labels = map[string]string{"team": "vision"} }, ""},
	} {
		updated := old.DeepCopy()
		tc.edit(updated)
		updated.SetDefaults(Options{}.Defaults())
		_, err := w.ValidateUpdate(context.Background(), old, updated)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal naming %s", name, err, tc.want)
		}
	}
}

// A template's own restartPolicy gives way to its replica's, as in kubeflow: the create says
// so; elasticPolicy.nProcPerNode is kubeflow's deprecated spelling: the create says so too.
func TestPyTorchJobWarnings(t *testing.T) {
	j := pytorchJob()
	j.Spec.PyTorchReplicaSpecs.Master.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	j.Spec.NprocPerNode = nil
	j.Spec.ElasticPolicy.NProcPerNode = ptr.To[int32](2)
	warnings, err := PyTorchJob{}.ValidateCreate(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"spec.pytorchReplicaSpecs.Master.template.spec.restartPolicy: Never gives way to the replica's restartPolicy OnFailure",
		"spec.elasticPolicy.nProcPerNode is deprecated"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", warnings, want)
		}
	}
}

// Workers run to completion as one batch Job each, each with the whole template: a spec whose
// copies would pass troupev1.MaxChildTemplateBytes is refused on the worker template's path, and
// 500 workers of a 100 KiB template are not.
func TestPyTorchJobWorkerCopiesBounded(t *testing.T) {
	job := func(workers int32, padding int) *troupev1.PyTorchJob {
		return &troupev1.PyTorchJob{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ml"},
			Spec: troupev1.PyTorchJobSpec{PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Worker: &troupev1.ReplicaSpec{
				Replicas: ptr.To(workers),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: troupev1.PyTorchMainContainer, Image: "train:1",
					Env: []corev1.EnvVar{{Name: "PADDING", Value: strings.Repeat("x", padding)}},
				}}}},
			}}},
		}
	}
	const path = "spec.pytorchReplicaSpecs.Worker.template"
	for name, tc := range map[string]struct {
		job     *troupev1.PyTorchJob
		refused bool
	}{
		"4,095 workers of a 20 KiB template": {job(troupev1.MaxWorkerReplicas, 20<<10), true},
		"500 workers of a 100 KiB template":  {job(500, 100<<10), false},
		"4,095 workers of a small template":  {job(troupev1.MaxWorkerReplicas, 100), false},
	} {
		t.Run(name, func(t *testing.T) {
			tc.job.SetDefaults(Options{}.Defaults())
			var found bool
			for _, e := range ValidatePyTorchJob(tc.job) {
				if e.Field == path && strings.Contains(e.Detail, "one batch Job each") {
					found = true
				}
			}
			if found != tc.refused {
				t.Errorf("refused on %s: %v, want %v (errors: %v)", path, found, tc.refused, ValidatePyTorchJob(tc.job))
			}
		})
	}
}
