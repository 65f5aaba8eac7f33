package kueue

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// Workload slices (Kueue's ElasticJobsViaWorkloadSlices, alpha in v0.17): an admitted elastic job
// grows by a second Workload, a slice, that names the admitted one in
// AnnotationSliceReplacementFor. Kueue's scheduler charges the slice only for what it adds to the
// Workload it replaces, and when it admits the slice it marks the replaced one Finished
// (reason WorkloadSliceReplaced), which hands that one's quota over. The job keeps running at its
// admitted size meanwhile; once the slice is admitted it is the job's Workload, and its pods
// beyond the old admission are made. Kueue's own jobs do this in its jobframework; an external
// framework makes and follows the slices itself (docs/kueue.md).
const (
	// AnnotationSliceReplacementFor, on a slice, is "<namespace>/<name>" of the Workload it
	// replaces: Kueue's workload-slice annotation.
	AnnotationSliceReplacementFor = "kueue.x-k8s.io/workload-slice-replacement-for"
)

// SlicesEnabled reports whether the job grows through Workload slices: an elastic job (its
// workers come and go without a restart) that opted in with troupev1.AnnotationElasticJob.
func SlicesEnabled(job metav1.Object, s *engine.Spec) bool {
	return s != nil && s.ElasticWorkers && job.GetAnnotations()[troupev1.AnnotationElasticJob] == "true"
}

// Slices are a job's Workloads as the integration reads them.
type Slices struct {
	// Current holds, or waits for, the job's admission; nil when the job has none.
	Current *kueuev1.Workload
	// Pending is a slice made to grow the job that waits for Kueue to admit it in place of Current.
	Pending *kueuev1.Workload
	// Superseded are Workloads of the job that hold quota, are not finished and that an admitted
	// slice replaced without Kueue finishing them (a Kueue without the feature gate admits a
	// slice as a whole Workload): the integration finishes them, which hands their quota back.
	Superseded []*kueuev1.Workload
	// Unwanted are Workloads without quota that are neither Current nor Pending: deleted.
	Unwanted []*kueuev1.Workload
	// Retired are slices done with: replaced (Finished as WorkloadSliceReplaced or OutOfSync) or
	// withdrawn (deleted without quota). Only Kueue's finalizer is left to remove.
	Retired []*kueuev1.Workload
}

// String says which Workload is which, for the log.
func (s Slices) String() string {
	name := func(wl *kueuev1.Workload) string {
		if wl == nil {
			return "-"
		}
		return wl.Name
	}
	names := func(wls []*kueuev1.Workload) []string {
		out := make([]string, 0, len(wls))
		for _, wl := range wls {
			out = append(out, wl.Name)
		}
		return out
	}
	return fmt.Sprintf("current %s, pending %s, superseded %v, unwanted %v, retired %v",
		name(s.Current), name(s.Pending), names(s.Superseded), names(s.Unwanted), names(s.Retired))
}

// ReplacementFor is the key of the Workload a slice replaces, "" when it is no slice.
func ReplacementFor(wl *kueuev1.Workload) string {
	return wl.Annotations[AnnotationSliceReplacementFor]
}

// sliceKey is how a slice names the Workload it replaces.
func sliceKey(wl *kueuev1.Workload) string { return wl.Namespace + "/" + wl.Name }

// retired reports whether a Workload is a slice done with.
func retired(wl *kueuev1.Workload) bool {
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason == kueuev1.WorkloadSliceReplaced || c.Reason == kueuev1.WorkloadFinishedReasonOutOfSync
	}
	return !wl.DeletionTimestamp.IsZero() && ReplacementFor(wl) != "" && !HasQuota(wl)
}

// JobSlices sorts a job's Workloads (all owned by it): the oldest live one is Current, and each
// later one that replaces it either waits (Pending) or, once it holds quota, takes its place.
func JobSlices(items []kueuev1.Workload) Slices {
	var out Slices
	var live []*kueuev1.Workload
	for i := range items {
		wl := &items[i]
		if retired(wl) {
			out.Retired = append(out.Retired, wl)
			continue
		}
		live = append(live, wl)
	}
	// Oldest first; a slice made within the second of the one it replaces comes after it.
	slices.SortStableFunc(live, func(a, b *kueuev1.Workload) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		switch {
		case ReplacementFor(b) == sliceKey(a):
			return -1
		case ReplacementFor(a) == sliceKey(b):
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, wl := range live {
		switch {
		case out.Current == nil:
			out.Current = wl
		case ReplacementFor(wl) == sliceKey(out.Current) && HasQuota(wl):
			out.Superseded = append(out.Superseded, out.Current)
			if out.Pending != nil {
				out.Unwanted = append(out.Unwanted, out.Pending)
				out.Pending = nil
			}
			out.Current = wl
		case ReplacementFor(wl) == sliceKey(out.Current) && out.Pending == nil:
			out.Pending = wl
		case HasQuota(wl):
			out.Superseded = append(out.Superseded, wl)
		default:
			out.Unwanted = append(out.Unwanted, wl)
		}
	}
	return out
}

// Stuck reports whether Kueue's scheduler left a slice aside after it failed to mark the Workload
// it replaces finished: Kueue (seen with v0.15.2; v0.17.0's scheduler takes the same path) then
// writes the slice's QuotaReserved False, reason Pending, with no message, and keeps it among the
// inadmissible Workloads until something else in its ClusterQueue changes. A slice that does not fit says why (insufficient quota, ...).
func Stuck(slice *kueuev1.Workload) bool {
	c := meta.FindStatusCondition(slice.Status.Conditions, kueuev1.WorkloadQuotaReserved)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Pending" && c.Message == ""
}

// Grows reports whether a job asking want pods (by pod set) asks, in the same pod sets, more than
// it is charged for in at least one of them and fewer in none: what a slice is for (Kueue charges
// a slice each pod set's count less the replaced Workload's).
func Grows(charged map[kueuev1.PodSetReference]int32, want []kueuev1.PodSet) bool {
	if len(want) != len(charged) {
		return false
	}
	more := false
	for _, ps := range want {
		n, ok := charged[ps.Name]
		if !ok || ps.Count < n {
			return false
		}
		more = more || ps.Count > n
	}
	return more
}

// Sliceable reports whether an admitted Workload can be replaced by a slice while its job runs:
// not placed by topology-aware scheduling (its pods carry the Workload's name for Kueue's
// ungater) and without admission checks (their podSetUpdates reach the templates only when a
// job starts). Other Workloads grow by the stop and the new Workload.
func Sliceable(wl *kueuev1.Workload) bool {
	if wl.Status.Admission == nil || len(wl.Status.AdmissionChecks) > 0 {
		return false
	}
	return !slices.ContainsFunc(wl.Status.Admission.PodSetAssignments, func(a kueuev1.PodSetAssignment) bool {
		return a.TopologyAssignment != nil || a.DelayedTopologyRequest != nil
	})
}

// SliceName is the name of a Workload made for a job at its generation when its first name
// (WorkloadName) is taken by one of its slices.
func SliceName(first string, generation int64) string {
	suffix := "-" + strconv.FormatInt(generation, 10)
	if max := 253 - len(suffix); len(first) > max {
		first = first[:max]
	}
	return first + suffix
}

// BuildSlice returns the slice that grows a job whose Workload is current to the counts of want:
// current's pod sets (templates, topology requests) with want's counts, its queue, priority,
// labels and owner (the job), named name, marking current as the Workload it replaces. Both are
// elastic Workloads to Kueue (troupev1.AnnotationElasticJob).
func BuildSlice(current *kueuev1.Workload, name string, want []kueuev1.PodSet) *kueuev1.Workload {
	counts := map[kueuev1.PodSetReference]int32{}
	for _, ps := range want {
		counts[ps.Name] = ps.Count
	}
	spec := *current.Spec.DeepCopy()
	for i := range spec.PodSets {
		if n, ok := counts[spec.PodSets[i].Name]; ok {
			spec.PodSets[i].Count = n
		}
	}
	wl := &kueuev1.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueuev1.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: current.Namespace,
			Labels:    maps.Clone(current.Labels),
			Annotations: map[string]string{
				troupev1.AnnotationElasticJob: "true",
				AnnotationSliceReplacementFor: sliceKey(current),
			},
			// Owned by the job, as current is: Kueue's batch Job integration (v0.15.4 and later)
			// keeps the job's Jobs running while the newest unfinished Workload the job owns, the
			// slice, is not evicted, also between finishing current and admitting the slice.
			OwnerReferences: slices.Clone(current.OwnerReferences),
			Finalizers:      []string{ResourceInUseFinalizer},
		},
		Spec: spec,
	}
	return wl
}

// GrowingCondition is the Admitted condition of a job that runs at current's admission while
// pending, the slice of its new size, waits: still admitted, and what it waits for.
func GrowingCondition(current, pending *kueuev1.Workload, queue string) metav1.Condition {
	c := AdmittedCondition(current, queue)
	c.Message = fmt.Sprintf("%s at %s; its new size (%s) waits in LocalQueue %s for quota (Workload slice %s)",
		c.Message, AdmittedPodSets(current), podSetsNote(pending.Spec.PodSets), queue, pending.Name)
	if q := meta.FindStatusCondition(pending.Status.Conditions, kueuev1.WorkloadQuotaReserved); q != nil && q.Status == metav1.ConditionFalse && q.Message != "" {
		c.Message += ": " + q.Message
	}
	return c
}

// podSetsNote says pod sets' counts as the admitted-pod-sets record does ("launcher=1,worker=3").
func podSetsNote(sets []kueuev1.PodSet) string {
	out := ""
	for i, ps := range sets {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%s=%d", ps.Name, ps.Count)
	}
	return out
}
