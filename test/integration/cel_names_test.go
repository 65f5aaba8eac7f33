package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

// A name the CRD refuses is refused in the webhook's words, with the limits computed for the job:
// every message of the webhook's validator (run here as a function: this suite's API server has
// no webhook) is part of the API server's refusal. The ChainerJob cases cover each way the job
// name and a worker set name can be too long together.
func TestCRDNameMessagesAreTheWebhooks(t *testing.T) {
	ns := newNamespace(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	chainer := func(name string, sets ...string) *troupev1.ChainerJob {
		w := testutil.MakeChainerJob(name, ns)
		for _, s := range sets {
			w.WorkerSet(s, 2)
		}
		return w.Obj()
	}
	worker := troupev1.MPIWorker{Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:test"}}}}}
	mpi := func(name string) *troupev1.MPIJob {
		return &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{Worker: worker}}}
	}
	horovod := func(name string) *troupev1.HorovodJob {
		w := *worker.DeepCopy()
		w.Template.Spec.Containers[0].Name = troupev1.HorovodMainContainer
		return &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: troupev1.HorovodJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{Worker: w}}}
	}
	pytorch := func(name string) *troupev1.PyTorchJob {
		return &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: troupev1.PyTorchJobSpec{PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{Master: &troupev1.ReplicaSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: troupev1.PyTorchMainContainer, Image: "train:1"}}}},
			}}}}
	}
	for _, tc := range []struct {
		name string
		job  client.Object
		want string // a part of the message that shows the computed limit
	}{
		{name: "chainer dotted", job: chainer("a.b")},
		{name: "chainer too long for the master Job", job: chainer(long(57)), want: "no more than 56 characters"},
		{name: "chainer name too long for any set", job: chainer(long(41), "ws0"), want: "metadata.name may have at most 38 characters"},
		{name: "chainer set name too long for any job", job: chainer("j", long(45)), want: "the worker set name may have at most 40 characters"},
		{name: "chainer both too long", job: chainer(long(41), long(41)), want: "may have 41 characters together"},
		{name: "chainer either may shrink", job: chainer(long(30), "s"+long(19)), want: "at most 21 characters or the worker set name to at most 11"},
		{name: "chainer one of two sets too long", job: chainer(long(39), "w", "ws0"), want: "at most 38 characters or the worker set name to at most 2"},
		{name: "mpi starts with a digit", job: mpi("1job")},
		{name: "mpi too long", job: mpi(long(46)), want: "would have 53 characters"},
		{name: "mpi longer than a DNS label", job: mpi(long(70)), want: "would have 77 characters"},
		{name: "horovod too long", job: horovod(long(50)), want: "would have 57 characters"},
		{name: "pytorch too long", job: pytorch(long(52)), want: "would have 64 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errs field.ErrorList
			switch j := tc.job.(type) {
			case *troupev1.ChainerJob:
				errs = webhooks.ValidateChainerJob(j)
			case *troupev1.MPIJob:
				errs = webhooks.ValidateMPIJob(j)
			case *troupev1.HorovodJob:
				errs = webhooks.ValidateHorovodJob(j)
			case *troupev1.PyTorchJob:
				errs = webhooks.ValidatePyTorchJob(j)
			}
			if len(errs) == 0 {
				t.Fatal("the webhook admits the job")
			}
			err := k8s.Create(context.Background(), tc.job)
			if err == nil {
				_ = k8s.Delete(context.Background(), tc.job)
				t.Fatal("the CRD admits the job")
			}
			for _, e := range errs {
				if !strings.Contains(err.Error(), e.Detail) {
					t.Errorf("the CRD's refusal lacks the webhook's %q:\n%v", e.Detail, err)
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the CRD's refusal lacks %q:\n%v", tc.want, err)
			}
		})
	}
}
