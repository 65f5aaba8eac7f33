package engine

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

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

// A cached pod keeps the labels the engine reads and its controller, not a tenant's labels (also
// ones under troupe.dev) nor other owner references: a template's labels cannot grow the
// operator's memory with every pod.
func TestCachedPodsKeepOnlyWhatIsRead(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p",
		Labels: map[string]string{
			troupev1.LabelJobUID: "u", troupev1.LabelRole: "worker", troupev1.LabelWorkerSet: "w",
			troupev1.LabelRestartAttempt: "1", troupev1.MPIJobNameLabel: "j",
			"bulk.troupe.dev/a": "x", "troupe.dev/anything": "y", "team": "vision",
		},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "1"},
			{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "j-worker", UID: "2", Controller: ptr.To(true)},
		}}}
	out, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := readBack(out)
	want := map[string]string{troupev1.LabelJobUID: "u", troupev1.LabelRole: "worker", troupev1.LabelWorkerSet: "w",
		troupev1.LabelRestartAttempt: "1", troupev1.MPIJobNameLabel: "j"}
	if !maps.Equal(got.Labels, want) {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "2" {
		t.Errorf("owner references %v, want the controller alone", got.OwnerReferences)
	}
}

// An object labelled as troupe's that no troupe job controls (a tenant's, an orphan, a retained
// claim) is cached as its identity, the labels the engine reads and its controller: a 1 MiB
// ConfigMap costs the cache a few hundred bytes. A troupe job's child is held whole.
func TestObjectsNoJobControlsAreCachedAsTheirIdentity(t *testing.T) {
	labels := map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: "u", "team": "vision"}
	big := map[string]string{"data": strings.Repeat("x", 1<<20)}
	for _, tc := range []struct {
		name  string
		owner *metav1.OwnerReference
		whole bool
	}{
		{"no owner", nil, false},
		{"controlled by a StatefulSet", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s", UID: "1", Controller: ptr.To(true)}, false},
		{"owned by a troupe job, not controlled", &metav1.OwnerReference{APIVersion: "troupe.dev/v1alpha1", Kind: "MPIJob", Name: "j", UID: "u"}, false},
		{"controlled by a troupe job", &metav1.OwnerReference{APIVersion: "troupe.dev/v1alpha1", Kind: "MPIJob", Name: "j", UID: "u", Controller: ptr.To(true)}, true},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c1", ResourceVersion: "7",
			Labels: maps.Clone(labels), Annotations: map[string]string{"note": "n"}}, Data: big}
		if tc.owner != nil {
			cm.OwnerReferences = []metav1.OwnerReference{*tc.owner}
		}
		out, err := trimUnlessTroupes(cm)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.ConfigMap)
		if tc.whole {
			if len(got.Data["data"]) != 1<<20 || got.Labels["team"] != "vision" {
				t.Errorf("%s: not held whole", tc.name)
			}
			continue
		}
		if got.Data != nil || got.Annotations != nil || got.Labels["team"] != "" {
			t.Errorf("%s: held more than its identity: %d data keys, annotations %v, labels %v", tc.name, len(got.Data), got.Annotations, got.Labels)
		}
		if got.Name != "c" || got.Namespace != "ns" || got.UID != "c1" || got.ResourceVersion != "7" || got.Labels[troupev1.LabelJobUID] != "u" {
			t.Errorf("%s: lost its identity: %+v", tc.name, got.ObjectMeta)
		}
		if (tc.owner != nil && tc.owner.Controller != nil) != (metav1.GetControllerOf(got) != nil) {
			t.Errorf("%s: controller %v", tc.name, got.OwnerReferences)
		}
	}
	// A PodGroup of a gang provider is unstructured.
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "g", "namespace": "ns", "labels": map[string]any{troupev1.LabelJobUID: "u", "team": "vision"}},
		"spec":     map[string]any{"minMember": int64(3)}}}
	out, err := trimUnlessTroupes(pg)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if _, has := got.Object["spec"]; has || got.GetKind() != "PodGroup" || got.GetName() != "g" || got.GetLabels()["team"] != "" {
		t.Errorf("foreign PodGroup held as %v", got.Object)
	}
}
