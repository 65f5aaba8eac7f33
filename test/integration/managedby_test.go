package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A job whose runPolicy.managedBy names another controller is left to it: no child, no status.
// The operator handles jobs in order, so once a job created after it has its children, the
// foreign one has been seen and passed over.
func TestManagedByAnotherController(t *testing.T) {
	ns := newNamespace(t)
	foreign := testutil.MakeChainerJob("foreign", ns).WorkerSet("ws0", 1).Obj()
	foreign.Spec.RunPolicy.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	create(t, foreign)
	create(t, testutil.MakeChainerJob("ours", ns).WorkerSet("ws0", 1).Obj())
	waitFor(t, &appsv1.StatefulSet{}, ns, "ours-workerset-ws0")
	waitFor(t, &batchv1.Job{}, ns, "ours-master")

	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign-master"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the master Job of a job managed by another controller: %v, want not found", err)
	}
	job := &troupev1.ChainerJob{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign"}, job); err != nil {
		t.Fatal(err)
	}
	if job.Status.Phase != "" || len(job.Status.Conditions) > 0 {
		t.Errorf("troupe wrote the status of a job managed by another controller: %+v", job.Status)
	}

	// managedBy cannot change once the job exists (the CRD's rule).
	job.Spec.RunPolicy.ManagedBy = ptr.To(troupev1.ManagedByTroupeOperator)
	if err := k8s.Update(ctx, job); err == nil || !strings.Contains(err.Error(), "managedBy") {
		t.Errorf("changing runPolicy.managedBy: %v, want refused naming the field", err)
	}
}
