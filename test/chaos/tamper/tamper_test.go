package tamper

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func mpiJob(name, ns string) *troupev1.MPIJob {
	return &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "mpi-uid"},
		Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
			Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:test"}}}}},
		}},
	}
}

func pytorchJob(name, ns string) *troupev1.PyTorchJob {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: troupev1.PyTorchMainContainer, Image: "torch:test"}}}}
	return &troupev1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid")},
		Spec: troupev1.PyTorchJobSpec{PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{
			Master: &troupev1.ReplicaSpec{Replicas: ptr.To[int32](1), Template: tmpl},
			Worker: &troupev1.ReplicaSpec{Replicas: ptr.To[int32](2), Template: tmpl},
		}},
	}
}

// ActionsFor follows the job's transport: a ChainerJob (KubeExec by default) has an exec Role
// and no SSH Secret, an MPIJob (SSH) the other way round, a PyTorchJob neither, nor a
// StatefulSet or a hostfile; and each kind's Actions are among its job's.
func TestActionsForFollowTheTransport(t *testing.T) {
	chainer := testutil.MakeChainerJob("cj", "ns").WorkerSet("ws0", 2).Obj()
	chainer.UID = "chainer-uid"
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(chainer, mpiJob("mj", "ns"), pytorchJob("pj", "ns")).Build()
	for _, tc := range []struct {
		target Target
		want   []string
	}{
		{Target{"ChainerJob", "ns", "cj"}, []string{ActionDeleteMaster, ActionDeleteWorkers, ActionDeleteService, ActionDeleteHostfile,
			ActionDeleteExecRole, ActionEditHostfile, ActionScaleWorkers, ActionRemoveOwnerRef}},
		{Target{"MPIJob", "ns", "mj"}, []string{ActionDeleteMaster, ActionDeleteWorkers, ActionDeleteService, ActionDeleteHostfile,
			ActionEditHostfile, ActionScaleWorkers, ActionRemoveOwnerRef, ActionDeleteSSHSecret}},
		{Target{"PyTorchJob", "ns", "pj"}, []string{ActionDeleteMaster, ActionDeleteService}},
	} {
		got, err := ActionsFor(context.Background(), c, tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ActionsFor(%s) (-want +got):\n%s", tc.target, diff)
		}
		for _, a := range append(Actions(tc.target.Kind), JobFailingActions(tc.target.Kind)...) {
			if !slices.Contains(got, a) {
				t.Errorf("Actions(%s) has %s, which its job with the default transport lacks", tc.target.Kind, a)
			}
		}
	}
	if len(Actions("HorovodJob")) == 0 || Actions("Unknown") != nil {
		t.Error("Actions: HorovodJob has none, or an unknown kind has some")
	}
}

// With no operator to answer, a tampering is reported not restored, naming what is missing,
// within its timeout; a job without the action's child is an error, not a pass.
func TestUnrestoredTamperingIsReported(t *testing.T) {
	job := mpiJob("mj", "ns")
	ref := metav1.NewControllerRef(job, troupev1.GroupVersion.WithKind("MPIJob"))
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "mj-worker", Namespace: "ns", UID: "sts-uid",
		OwnerReferences: []metav1.OwnerReference{*ref}}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(job, sts).Build()
	target := Target{"MPIJob", "ns", "mj"}

	res := Do(context.Background(), c, target, ActionRemoveOwnerRef, 200*time.Millisecond)
	if res.Restored || res.Err == nil || !strings.Contains(res.Outcome, "no owner reference to the job") {
		t.Errorf("orphaned with nobody to adopt it: %+v", res)
	}
	var got appsv1.StatefulSet
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sts), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("owner references after the tampering: %+v", got.OwnerReferences)
	}

	res = Do(context.Background(), c, target, ActionDeleteService, time.Second)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "Service mj") {
		t.Errorf("a child that does not exist: %+v", res)
	}
	res = Do(context.Background(), c, target, ActionDeleteExecRole, time.Second)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "no child") {
		t.Errorf("an action the job has no child for: %+v", res)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`Internal error occurred: failed calling webhook "mmpijob.troupe.dev": failed to call webhook: Post "https://localhost:1/x": dial tcp: connect: connection refused`, AnswerWebhookUnreachable},
		{`admission webhook "vmpijob.troupe.dev" denied the request: spec.worker.replicas: Invalid value`, answerWebhook},
		{`MPIJob.troupe.dev "x" is invalid: spec.worker.replicas: Invalid value: 0: should be greater than or equal to 1`, AnswerCRDRule},
		{`namespaces "gone" not found`, AnswerOther},
	} {
		if got := classify(tc.msg, "spec.worker.replicas"); got != tc.want {
			t.Errorf("classify(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// A job that has ended is not tampered with: its children would not be created again, so the
// result says so with ErrJobFinished, which a harness tells apart from a failed restore.
func TestFinishedJobIsNotTamperedWith(t *testing.T) {
	job := mpiJob("mj", "ns")
	job.Status.Phase = troupev1.JobSucceeded
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(job).Build()
	res := Do(context.Background(), c, Target{"MPIJob", "ns", "mj"}, ActionDeleteMaster, time.Second)
	if !errors.Is(res.Err, ErrJobFinished) || res.Restored {
		t.Errorf("tampering with a Succeeded job: %+v, want ErrJobFinished", res)
	}
}

// A PyTorchJob's worker Jobs come before its master Job among the children: the master's
// deletion takes the master Job, named <job>-master.
func TestDeleteMasterTakesTheMasterJob(t *testing.T) {
	target := Target{"PyTorchJob", "ns", "pj"}
	kids, err := desiredChildren(pytorchJob("pj", "ns"), target)
	if err != nil {
		t.Fatal(err)
	}
	if got := pickChild(kids, ActionDeleteMaster, target); got == nil || got.GetName() != troupev1.PyTorchMasterJob.For("pj") {
		t.Errorf("delete-master-job takes %v, want the Job %s", got, troupev1.PyTorchMasterJob.For("pj"))
	}
}
