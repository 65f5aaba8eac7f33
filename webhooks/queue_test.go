package webhooks

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func queuedChainerJob(sets ...string) *troupev1.ChainerJob {
	job := &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", Labels: map[string]string{troupev1.LabelQueueName: "lq"}},
		Spec: troupev1.ChainerJobSpec{Master: troupev1.ChainerMaster{Template: chainerTemplate(0)},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{}},
	}
	for _, s := range sets {
		job.Spec.WorkerSets[s] = troupev1.ChainerWorkerSet{Replicas: ptr.To[int32](1), Template: chainerTemplate(0)}
	}
	return job
}

func request(op admissionv1.Operation, storedSuspend *bool) context.Context {
	old := []byte(`{}`)
	if storedSuspend != nil {
		old = fmt.Appendf(nil, `{"spec":{"runPolicy":{"suspend":%t}}}`, *storedSuspend)
	}
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, OldObject: runtime.RawExtension{Raw: old}}})
}

// A job queued in Kueue is created suspended, with Kueue in the cluster or not (held until it
// is). The update with which Kueue's admission resumes it keeps suspend false; an update that
// drops suspend (a server-side apply of its manifest) keeps the stored job suspended. Without
// the label nothing changes.
func TestQueuedJobCreatedSuspended(t *testing.T) {
	tests := []struct {
		name          string
		label         bool
		op            admissionv1.Operation
		storedSuspend *bool
		suspend       *bool
		want          bool
	}{
		{"queued, created", true, admissionv1.Create, nil, ptr.To(false), true},
		{"queued, resumed by an update", true, admissionv1.Update, ptr.To(true), ptr.To(false), false},
		{"queued, an update drops suspend", true, admissionv1.Update, ptr.To(true), nil, true},
		{"queued and running, an update drops suspend", true, admissionv1.Update, ptr.To(false), nil, false},
		{"not queued", false, admissionv1.Create, nil, ptr.To(false), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := queuedChainerJob("ws0")
			if !tc.label {
				job.Labels = nil
			}
			job.Spec.RunPolicy.Suspend = tc.suspend
			if err := (ChainerJob{Options{}}).Default(request(tc.op, tc.storedSuspend), job); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(job.Spec.RunPolicy.Suspend, false); got != tc.want {
				t.Errorf("suspend = %t, want %t", got, tc.want)
			}
		})
	}
	mpi := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{troupev1.LabelQueueName: "lq"}}}
	if err := (MPIJob{Options{}}).Default(request(admissionv1.Create, nil), mpi); err != nil || !ptr.Deref(mpi.Spec.RunPolicy.Suspend, false) {
		t.Errorf("queued MPIJob: suspend %v (%v), want true", mpi.Spec.RunPolicy.Suspend, err)
	}
	hvd := &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{troupev1.LabelQueueName: "lq"}}}
	if err := (HorovodJob{Options{}}).Default(request(admissionv1.Create, nil), hvd); err != nil || !ptr.Deref(hvd.Spec.RunPolicy.Suspend, false) {
		t.Errorf("queued HorovodJob: suspend %v (%v), want true", hvd.Spec.RunPolicy.Suspend, err)
	}
}

// A Kueue Workload has at most 8 pod sets, and the master's is named master.
func TestQueuedChainerJobPodSets(t *testing.T) {
	var seven, eight []string
	for i := range 8 {
		eight = append(eight, fmt.Sprintf("ws%d", i))
	}
	seven = eight[:7]
	if errs := validateQueued(queuedChainerJob(seven...)); len(errs) != 0 {
		t.Errorf("7 worker sets: %v", errs)
	}
	errs := validateQueued(queuedChainerJob(eight...))
	if len(errs) != 1 || errs[0].Field != "metadata.labels[kueue.x-k8s.io/queue-name]" || !strings.Contains(errs[0].Detail, "at most 8 pod sets") {
		t.Errorf("8 worker sets: %v, want one error on the queue label saying at most 8 pod sets", errs)
	}
	errs = ValidateChainerJob(queuedChainerJob("master"))
	if len(errs) != 1 || errs[0].Field != "spec.workerSets[master]" {
		t.Errorf("worker set named master: %v, want one error on spec.workerSets[master]", errs)
	}
	notQueued := queuedChainerJob(eight...)
	notQueued.Labels = nil
	if errs := validateQueued(notQueued); len(errs) != 0 {
		t.Errorf("a job without the queue label: %v", errs)
	}
}

func TestQueueCannotChangeWhileRunning(t *testing.T) {
	o := Options{}
	stored := queuedChainerJob("ws0")
	stored.SetDefaults(o.Defaults())
	for _, queue := range []string{"", "other"} {
		updated := stored.DeepCopy()
		updated.Labels = map[string]string{troupev1.LabelQueueName: queue}
		_, err := (ChainerJob{o}).ValidateUpdate(context.Background(), stored, updated)
		if err == nil || !strings.Contains(err.Error(), "kueue.x-k8s.io/queue-name") {
			t.Errorf("queue lq -> %q on a running job: %v, want refused at the label", queue, err)
		}
		suspended := stored.DeepCopy()
		suspended.Spec.RunPolicy.Suspend = ptr.To(true)
		updated.Spec.RunPolicy.Suspend = ptr.To(true)
		if _, err := (ChainerJob{o}).ValidateUpdate(context.Background(), suspended, updated); err != nil {
			t.Errorf("queue lq -> %q on a suspended job: %v", queue, err)
		}
	}
}

func TestManagedByCannotChange(t *testing.T) {
	o := Options{}
	stored := queuedChainerJob("ws0")
	stored.SetDefaults(o.Defaults())
	updated := stored.DeepCopy()
	updated.Spec.RunPolicy.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	_, err := (ChainerJob{o}).ValidateUpdate(context.Background(), stored, updated)
	if err == nil || !strings.Contains(err.Error(), "spec.runPolicy.managedBy") {
		t.Errorf("managedBy set on a stored job: %v, want refused at spec.runPolicy.managedBy", err)
	}
}

// requestWithStored is an admission request whose stored job is raw.
func requestWithStored(op admissionv1.Operation, raw string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, OldObject: runtime.RawExtension{Raw: []byte(raw)}}})
}

// Kueue's MultiKueue reads spec.managedBy of a kind it does not know, and clears it on the copy
// it makes in a worker cluster: runPolicy.managedBy kueue.x-k8s.io/multikueue (kubeflow's place)
// is stored there. A job MultiKueue dispatches is not suspended at creation: it runs no pod in
// the manager cluster, and its suspend is the user's. An update moves it only where the stored
// job has it, so that a job stored while the webhook was down is not refused its own manifest.
func TestMultiKueueManagedByStoredInSpec(t *testing.T) {
	const mk = troupev1.ManagedByMultiKueue
	tests := []struct {
		name                 string
		ctx                  context.Context
		runPolicy, spec      *string
		wantRunPolicy, wantS *string
		wantSuspend          bool
	}{
		{"runPolicy, created", request(admissionv1.Create, nil), ptr.To(mk), nil, nil, ptr.To(mk), false},
		{"spec, created", request(admissionv1.Create, nil), nil, ptr.To(mk), nil, ptr.To(mk), false},
		{"both, created", request(admissionv1.Create, nil), ptr.To(mk), ptr.To(mk), nil, ptr.To(mk), false},
		{"runPolicy, updated, stored in spec", requestWithStored(admissionv1.Update, `{"spec":{"managedBy":"`+mk+`"}}`),
			ptr.To(mk), nil, nil, ptr.To(mk), false},
		{"runPolicy, updated, stored in runPolicy", requestWithStored(admissionv1.Update, `{"spec":{"runPolicy":{"managedBy":"`+mk+`"}}}`),
			ptr.To(mk), nil, ptr.To(mk), nil, false},
		{"another controller stays", request(admissionv1.Create, nil), ptr.To("example.com/other"), nil,
			ptr.To("example.com/other"), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := queuedChainerJob("ws0")
			job.Spec.RunPolicy.ManagedBy, job.Spec.ManagedBy = tc.runPolicy, tc.spec
			if err := (ChainerJob{}).Default(tc.ctx, job); err != nil {
				t.Fatal(err)
			}
			if got := job.Spec.RunPolicy.ManagedBy; ptr.Deref(got, "") != ptr.Deref(tc.wantRunPolicy, "") {
				t.Errorf("runPolicy.managedBy = %v, want %v", ptr.Deref(got, "<unset>"), ptr.Deref(tc.wantRunPolicy, "<unset>"))
			}
			if got := job.Spec.ManagedBy; ptr.Deref(got, "") != ptr.Deref(tc.wantS, "") {
				t.Errorf("spec.managedBy = %v, want %v", ptr.Deref(got, "<unset>"), ptr.Deref(tc.wantS, "<unset>"))
			}
			if got := ptr.Deref(job.Spec.RunPolicy.Suspend, false); got != tc.wantSuspend {
				t.Errorf("suspend = %v, want %v", got, tc.wantSuspend)
			}
		})
	}
}

// Two managedBy that disagree are refused, naming spec.managedBy; spec.managedBy cannot change.
func TestManagedByFieldsAgree(t *testing.T) {
	o := Options{}
	job := queuedChainerJob("ws0")
	job.Spec.ManagedBy = ptr.To(troupev1.ManagedByMultiKueue)
	job.Spec.RunPolicy.ManagedBy = ptr.To("example.com/other")
	job.SetDefaults(o.Defaults())
	if _, err := (ChainerJob{o}).ValidateCreate(context.Background(), job); err == nil || !strings.Contains(err.Error(), "spec.managedBy") {
		t.Errorf("two controllers: %v, want refused at spec.managedBy", err)
	}

	stored := queuedChainerJob("ws0")
	stored.SetDefaults(o.Defaults())
	updated := stored.DeepCopy()
	updated.Spec.ManagedBy = ptr.To(troupev1.ManagedByMultiKueue)
	if _, err := (ChainerJob{o}).ValidateUpdate(context.Background(), stored, updated); err == nil || !strings.Contains(err.Error(), "spec.managedBy") {
		t.Errorf("spec.managedBy set on a stored job: %v, want refused at spec.managedBy", err)
	}
	if _, err := (ChainerJob{o}).ValidateUpdate(context.Background(), updated, updated.DeepCopy()); err != nil {
		t.Errorf("an update that changes nothing: %v", err)
	}
}

// A job MultiKueue dispatches without a queue label is dispatched by nobody: the create says so.
func TestMultiKueueWithoutQueueWarns(t *testing.T) {
	o := Options{}
	job := queuedChainerJob("ws0")
	delete(job.Labels, troupev1.LabelQueueName)
	job.Spec.ManagedBy = ptr.To(troupev1.ManagedByMultiKueue)
	job.SetDefaults(o.Defaults())
	warnings, err := (ChainerJob{o}).ValidateCreate(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(warnings, "\n"), troupev1.LabelQueueName) {
		t.Errorf("warnings %q, want one naming %s", warnings, troupev1.LabelQueueName)
	}
}
