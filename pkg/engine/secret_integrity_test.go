package engine

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// keysBackend generates one Secret, "<job>-keys", with fresh data each time it is asked, as the
// MPI backend's SSH transport generates its key pairs.
type keysBackend struct{ generated *int }

func (keysBackend) Objects(s *Spec) []client.Object {
	return []client.Object{&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-keys"},
	}}
}

func (keysBackend) DecoratePod(*Spec, *WorkerSet, *corev1.PodTemplateSpec) {}

func (b keysBackend) Generate(s *Spec, obj client.Object) error {
	if secret, ok := obj.(*corev1.Secret); ok && secret.Name == s.Name+"-keys" {
		*b.generated++
		secret.Data = map[string][]byte{"key": {byte(*b.generated)}}
	}
	return nil
}

type keysAdapter struct{ masterOnlyAdapter }

var keysGenerated int

func (a keysAdapter) Describe(job Object, s *Spec) error {
	if err := a.masterOnlyAdapter.Describe(job, s); err != nil {
		return err
	}
	s.Backend = keysBackend{generated: &keysGenerated}
	return nil
}

// reconcileKeysJob runs one pass over the job "train" with objs already on the API server and
// returns the API server.
func reconcileKeysJob(t *testing.T, job *troupev1.ChainerJob, objs ...client.Object) client.Client {
	t.Helper()
	c := fakeJobClient(t, append([]client.Object{job}, objs...)...)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
		client: c, apiReader: c, recorder: events.NewFakeRecorder(100), adapter: keysAdapter{}, gvk: chainerJobGVK,
		clock: clocktesting.NewFakePassiveClock(metav1.Now().Time),
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return c
}

func getJob(t *testing.T, c client.Client, key client.ObjectKey) *troupev1.ChainerJob {
	t.Helper()
	var got troupev1.ChainerJob
	if err := c.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// The record of a generated Secret is in the job's status from the pass that creates it, with
// the hash of what the operator wrote, and the master starts in the same pass.
func TestGeneratedSecretIsRecordedWhenCreated(t *testing.T) {
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := reconcileKeysJob(t, job)
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "train-keys"}, &secret); err != nil {
		t.Fatal(err)
	}
	got := getJob(t, c, client.ObjectKeyFromObject(job))
	if len(got.Status.GeneratedSecrets) != 1 || got.Status.GeneratedSecrets[0].SHA256 != secretDataHash(secret.Data) {
		t.Errorf("status.generatedSecrets = %+v, want the hash of the Secret's data", got.Status.GeneratedSecrets)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err != nil {
		t.Errorf("the master Job after the Secret: %v", err)
	}
}

// A Secret under the generated Secret's name that the operator has no record of was written by
// someone else, who may put the job's labels and a controller reference to the job on it (no
// admission stops that), and knows its keys. It is reported as not troupe's, and no launcher
// starts with it. An orphan of the same kind is not adopted.
func TestPlantedSecretIsNotTheJobs(t *testing.T) {
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
	}{
		{"with a controller reference to the job", []metav1.OwnerReference{*metav1.NewControllerRef(job, chainerJobGVK)}},
		{"orphan with the job's labels", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planted := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name: "train-keys", Namespace: "ml", OwnerReferences: tc.owners,
					Labels: map[string]string{troupev1.LabelJobUID: "uid-1", troupev1.LabelManagedBy: troupev1.ManagedByTroupe},
				},
				Data: map[string][]byte{"key": []byte("the planter's key")},
			}
			c := reconcileKeysJob(t, job.DeepCopy(), planted)
			got := getJob(t, c, client.ObjectKeyFromObject(job))
			tampered := meta.IsStatusConditionTrue(got.Status.Conditions, troupev1.ConditionSecretTampered)
			conflict := false
			if ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); ini != nil {
				conflict = ini.Reason == troupev1.ReasonChildConflict
			}
			if !tampered && !conflict {
				t.Errorf("conditions %+v: want SecretTampered or a name conflict", got.Status.Conditions)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err == nil {
				t.Error("a master Job was created with a Secret troupe did not write")
			}
			var secret corev1.Secret
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(planted), &secret); err != nil {
				t.Fatal(err)
			}
			if len(secret.OwnerReferences) != len(tc.owners) {
				t.Errorf("the planted Secret's owners: %+v, want them untouched (%d)", secret.OwnerReferences, len(tc.owners))
			}
		})
	}
}

// A generated Secret that lost its owner reference but still holds what the operator recorded
// is the job's own: it is adopted back.
func TestRecordedOrphanSecretIsAdopted(t *testing.T) {
	data := map[string][]byte{"key": []byte("what troupe wrote")}
	job := &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"},
		Status: troupev1.JobStatus{
			GeneratedSecrets: []troupev1.GeneratedSecretRecord{{Name: "train-keys", SHA256: secretDataHash(data)}},
		},
	}
	orphan := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-keys", Namespace: "ml",
			Labels: map[string]string{troupev1.LabelJobUID: "uid-1", troupev1.LabelManagedBy: troupev1.ManagedByTroupe},
		},
		Data: data,
	}
	c := reconcileKeysJob(t, job, orphan)
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(orphan), &secret); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&secret, job) {
		t.Errorf("the recorded orphan's owners: %+v, want the job", secret.OwnerReferences)
	}
	got := getJob(t, c, client.ObjectKeyFromObject(job))
	if meta.IsStatusConditionTrue(got.Status.Conditions, troupev1.ConditionSecretTampered) {
		t.Error("the job's own Secret is reported as tampered")
	}
}

// When the job changed since the pass read it, the record's write conflicts: the pass ends
// quietly (no error for the controller to log and back off on), with no Secret and no other
// child created; the watch event of the newer version runs the next pass.
func TestRecordConflictEndsThePass(t *testing.T) {
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	base := fakeJobClient(t, job)
	c := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return apierrors.NewConflict(schema.GroupResource{Group: "troupe.dev", Resource: "chainerjobs"}, obj.GetName(), errors.New("changed"))
		},
	})
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c,
		recorder: events.NewFakeRecorder(100), adapter: keysAdapter{}, gvk: chainerJobGVK, clock: clocktesting.NewFakePassiveClock(now.Time)}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatalf("reconcile: %v, want the pass to end without an error", err)
	}
	var secrets corev1.SecretList
	var jobs batchv1.JobList
	if err := base.List(context.Background(), &secrets); err != nil {
		t.Fatal(err)
	}
	if err := base.List(context.Background(), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 || len(jobs.Items) != 0 {
		t.Errorf("%d Secrets and %d Jobs created after the record's write conflicted", len(secrets.Items), len(jobs.Items))
	}
}
