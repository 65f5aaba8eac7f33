package kueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

var sliceT0 = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

// sliceWorkload is a Workload of the job "j" (namespace ns) named name, made at t0 plus made
// seconds, of workers; replaces names the Workload it is a slice for; quota says it holds quota.
func sliceWorkload(name string, made int, workers int32, replaces string, quota bool) kueuev1.Workload {
	wl := kueuev1.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(sliceT0.Add(time.Duration(made) * time.Second)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: troupev1.GroupVersion.String(), Kind: "PyTorchJob",
				Name: "j", UID: "job-uid", Controller: ptr.To(true)}},
		},
		Spec: kueuev1.WorkloadSpec{PodSets: []kueuev1.PodSet{{Name: "worker", Count: workers}}, QueueName: "lq"},
	}
	if replaces != "" {
		wl.Annotations = map[string]string{AnnotationSliceReplacementFor: "ns/" + replaces}
	}
	if quota {
		wl.Status.Admission = &kueuev1.Admission{ClusterQueue: "cq",
			PodSetAssignments: []kueuev1.PodSetAssignment{{Name: "worker", Count: ptr.To(workers)}}}
		wl.Status.Conditions = []metav1.Condition{
			{Type: kueuev1.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"},
			{Type: kueuev1.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"},
		}
	}
	return wl
}

// replacedBySlice marks wl finished as Kueue's scheduler does when it admits the slice for it.
func replacedBySlice(wl kueuev1.Workload, at time.Time) kueuev1.Workload {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueuev1.WorkloadFinished,
		Status: metav1.ConditionTrue, Reason: kueuev1.WorkloadSliceReplaced, LastTransitionTime: metav1.NewTime(at)})
	return wl
}

// A job's Workloads sorted as the integration reads them, in every phase of a grow.
func TestJobSlices(t *testing.T) {
	first := sliceWorkload("first", 0, 2, "", true)
	names := func(wls []*kueuev1.Workload) []string {
		var out []string
		for _, wl := range wls {
			out = append(out, wl.Name)
		}
		return out
	}
	name := func(wl *kueuev1.Workload) string {
		if wl == nil {
			return ""
		}
		return wl.Name
	}
	type sorted struct {
		Current, Pending              string
		Superseded, Unwanted, Retired []string
	}
	cases := map[string]struct {
		items []kueuev1.Workload
		want  sorted
	}{
		"one Workload": {
			items: []kueuev1.Workload{first},
			want:  sorted{Current: "first"},
		},
		"a slice waits for quota": {
			items: []kueuev1.Workload{sliceWorkload("slice", 5, 3, "first", false), first},
			want:  sorted{Current: "first", Pending: "slice"},
		},
		"made within the second of the one it replaces, it still comes after it": {
			items: []kueuev1.Workload{sliceWorkload("a-slice", 0, 3, "first", false), first},
			want:  sorted{Current: "first", Pending: "a-slice"},
		},
		"Kueue finished the first for the slice and has not admitted the slice yet": {
			items: []kueuev1.Workload{replacedBySlice(first, sliceT0), sliceWorkload("slice", 5, 3, "first", false)},
			want:  sorted{Current: "slice", Retired: []string{"first"}},
		},
		"the slice admitted in place of the first": {
			items: []kueuev1.Workload{replacedBySlice(first, sliceT0), sliceWorkload("slice", 5, 3, "first", true)},
			want:  sorted{Current: "slice", Retired: []string{"first"}},
		},
		"a slice admitted as a whole Workload (no gate) supersedes the first": {
			items: []kueuev1.Workload{first, sliceWorkload("slice", 5, 3, "first", true)},
			want:  sorted{Current: "slice", Superseded: []string{"first"}},
		},
		"a second slice for the same Workload is unwanted": {
			items: []kueuev1.Workload{first, sliceWorkload("slice", 5, 3, "first", false), sliceWorkload("slice-2", 6, 4, "first", false)},
			want:  sorted{Current: "first", Pending: "slice", Unwanted: []string{"slice-2"}},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			sl := JobSlices(tc.items)
			got := sorted{Current: name(sl.Current), Pending: name(sl.Pending),
				Superseded: names(sl.Superseded), Unwanted: names(sl.Unwanted), Retired: names(sl.Retired)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobSlices (-want +got):\n%s", diff)
			}
		})
	}
}

// A slice grows the job in the pod sets it has, never shrinks one.
func TestGrows(t *testing.T) {
	charged := map[kueuev1.PodSetReference]int32{"launcher": 1, "worker": 2}
	sets := func(l, w int32) []kueuev1.PodSet {
		return []kueuev1.PodSet{{Name: "launcher", Count: l}, {Name: "worker", Count: w}}
	}
	cases := map[string]struct {
		want []kueuev1.PodSet
		grow bool
	}{
		"more workers":              {sets(1, 3), true},
		"the same":                  {sets(1, 2), false},
		"fewer workers":             {sets(1, 1), false},
		"more workers, no launcher": {sets(0, 3), false},
		"another pod set":           {[]kueuev1.PodSet{{Name: "launcher", Count: 1}, {Name: "ps", Count: 3}}, false},
		"fewer pod sets":            {[]kueuev1.PodSet{{Name: "worker", Count: 3}}, false},
		"more of both":              {sets(2, 3), true},
	}
	for n, tc := range cases {
		if got := Grows(charged, tc.want); got != tc.grow {
			t.Errorf("%s: Grows = %v, want %v", n, got, tc.grow)
		}
	}
}

// The slice is the current Workload at the new counts, owned by the job as the current one is
// (Kueue's batch Job integration reads the job's newest unfinished Workload), elastic, and
// naming the Workload it replaces.
func TestBuildSlice(t *testing.T) {
	current := sliceWorkload("first", 0, 2, "", true)
	current.Labels = map[string]string{troupev1.LabelJobUID: "job-uid"}
	current.Annotations = map[string]string{troupev1.AnnotationElasticJob: "true"}
	got := BuildSlice(&current, "first-2", []kueuev1.PodSet{{Name: "worker", Count: 3}})
	if diff := cmp.Diff(current.OwnerReferences, got.OwnerReferences); diff != "" {
		t.Errorf("owner (-current +slice):\n%s", diff)
	}
	wantAnn := map[string]string{troupev1.AnnotationElasticJob: "true", AnnotationSliceReplacementFor: "ns/first"}
	if diff := cmp.Diff(wantAnn, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if got.Name != "first-2" || got.Spec.PodSets[0].Count != 3 || got.Spec.QueueName != "lq" ||
		got.Labels[troupev1.LabelJobUID] != "job-uid" || got.Status.Admission != nil {
		t.Errorf("slice %s: %d workers in %s, labels %v, admission %v; want first-2, 3 in lq, the job's UID, none",
			got.Name, got.Spec.PodSets[0].Count, got.Spec.QueueName, got.Labels, got.Status.Admission)
	}
	if current.Spec.PodSets[0].Count != 2 {
		t.Errorf("the current Workload was changed: %d workers", current.Spec.PodSets[0].Count)
	}
}

// Between Kueue finishing the replaced Workload and admitting the slice, the job runs on for
// SwapGrace.
func TestSwapping(t *testing.T) {
	slice := sliceWorkload("slice", 5, 3, "first", false)
	finished := replacedBySlice(sliceWorkload("first", 0, 2, "", true), sliceT0.Add(6*time.Second))
	retired := []*kueuev1.Workload{&finished}
	if !Swapping(&slice, retired, sliceT0.Add(7*time.Second)) {
		t.Errorf("not swapping 1 s after Kueue finished the replaced Workload")
	}
	if Swapping(&slice, retired, sliceT0.Add(6*time.Second+SwapGrace)) {
		t.Errorf("still swapping %s after Kueue finished the replaced Workload", SwapGrace)
	}
	plain := sliceWorkload("other", 0, 2, "", false)
	if Swapping(&plain, retired, sliceT0.Add(7*time.Second)) {
		t.Errorf("a Workload that is no slice is swapping")
	}
}
