package engine

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// fakeJobClient is a fake API server holding objs, as the reconciler needs one: troupe's kinds
// and Kubernetes' in its scheme, a ChainerJob's status a subresource, and pods indexed by the
// job-UID field the engine lists them by (SetupIndexes).
func fakeJobClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&troupev1.ChainerJob{}).
		WithIndex(&corev1.Pod{}, jobUIDField, jobUIDOf).WithIndex(&batchv1.Job{}, jobUIDField, jobUIDOf).
		WithObjects(objs...).Build()
}
