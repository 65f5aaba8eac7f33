package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A cached job keeps what the engine reads and loses kubectl apply's copy of itself and the
// managed fields.
func TestCachedJobsDropWhatIsNotRead(t *testing.T) {
	job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "j",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{}}`, "team": "vision"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := stripFieldsNotRead(job)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*troupev1.MPIJob)
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok || got.ManagedFields != nil {
		t.Errorf("kept the last-applied annotation or the managed fields: %v %v", got.Annotations, got.ManagedFields)
	}
	if got.Annotations["team"] != "vision" {
		t.Errorf("lost another annotation: %v", got.Annotations)
	}
}
