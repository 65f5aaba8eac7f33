package kueue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

const (
	// ResourceInUseFinalizer keeps an admitted Workload, and so its quota, until its job has
	// handed it back: Kueue's finalizer, which the job's controller adds and removes.
	ResourceInUseFinalizer = kueuev1.ResourceInUseFinalizerName
	// LabelKueueJobUID is Kueue's label of a Workload's job UID.
	LabelKueueJobUID = "kueue.x-k8s.io/job-uid"
	// MaxPodSets is how many pod sets a Workload may have.
	MaxPodSets = 8
)

// WorkloadName is the name of the job's Workload: <kind>-<job>-<hash>, the hash over the kind,
// the job's name and its UID, so that a job recreated under the same name gets a new one and
// jobs of two kinds never share one.
func WorkloadName(gvk schema.GroupVersionKind, name string, uid types.UID) string {
	h := sha256.Sum256([]byte(gvk.GroupKind().String() + "/" + name + "/" + string(uid)))
	prefix := strings.ToLower(gvk.Kind) + "-" + name
	// An object name has at most 253 characters: room for "-" and the hash.
	if max := 253 - 1 - 5; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + "-" + hex.EncodeToString(h[:])[:5]
}

// Priority is the Workload's priority: the class it came from and its value.
type Priority struct {
	Ref   *kueuev1.PriorityClassRef
	Value *int32
}

// BuildWorkload returns the Workload of a job queued in LocalQueue queue: one pod set per pod
// set of the job, master (launcher) first, each with its count and its pod template as the
// adapter describes it (requests included, for a launcher the operator generates too). The
// Workload is owned by the job and carries Kueue's finalizer; s.Owner is the job.
func BuildWorkload(s *engine.Spec, gvk schema.GroupVersionKind, sets []troupev1.PodSet, queue string, p Priority) (*kueuev1.Workload, error) {
	m := int(s.MasterPods()) // the master's pod set comes first, if it has one
	if len(sets) != m+len(s.WorkerSets) {
		return nil, fmt.Errorf("the job has %d pod sets but %d worker sets and %d masters", len(sets), len(s.WorkerSets), m)
	}
	master := ""
	if m > 0 {
		master = sets[0].Name
	}
	podSets := PodSetCounts(s, master)
	if m > 0 {
		podSets[0].Template = *s.Master.Template.DeepCopy()
		req, err := TopologyRequest(s.Master.Template.Annotations, "")
		if err != nil {
			return nil, fmt.Errorf("pod set %s: %w", master, err)
		}
		podSets[0].TopologyRequest = req
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		if sets[m+i].Name != ws.Name {
			return nil, fmt.Errorf("pod set %d is %q but worker set %d is %q", m+i, sets[m+i].Name, i, ws.Name)
		}
		podSets[m+i].Template = *ws.Template.DeepCopy()
		req, err := TopologyRequest(ws.Template.Annotations, podIndexLabel(s, ws))
		if err != nil {
			return nil, fmt.Errorf("pod set %s: %w", ws.Name, err)
		}
		podSets[m+i].TopologyRequest = req
	}
	owner := s.Owner
	owner.BlockOwnerDeletion = ptr.To(true)
	return &kueuev1.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueuev1.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkloadName(gvk, s.Name, s.Owner.UID),
			Namespace: s.Namespace,
			Labels: map[string]string{
				troupev1.LabelManagedBy: troupev1.ManagedByTroupe,
				troupev1.LabelJobUID:    string(s.Owner.UID),
				LabelKueueJobUID:        string(s.Owner.UID),
			},
			OwnerReferences: []metav1.OwnerReference{owner},
			Finalizers:      []string{ResourceInUseFinalizer},
		},
		Spec: kueuev1.WorkloadSpec{
			PodSets:          podSets,
			QueueName:        kueuev1.LocalQueueName(queue),
			PriorityClassRef: p.Ref,
			Priority:         p.Value,
		},
	}, nil
}

// PodSetCounts are a job's pod sets as its Workload counts them, without their templates: the
// master's pod set (named master) with one pod if the job has a master, then each worker set
// with its replicas.
func PodSetCounts(s *engine.Spec, master string) []kueuev1.PodSet {
	var out []kueuev1.PodSet
	if s.HasMaster() {
		out = append(out, kueuev1.PodSet{Name: kueuev1.PodSetReference(master), Count: 1})
	}
	for i := range s.WorkerSets {
		out = append(out, kueuev1.PodSet{Name: kueuev1.PodSetReference(s.WorkerSets[i].Name), Count: s.WorkerSets[i].Replicas})
	}
	return out
}

// PodSetCountsChange says how pod sets (a Workload's) differ in names or counts from the ones
// wanted, for example "ws0: 2 -> 3", or "" when they agree.
func PodSetCountsChange(have, want []kueuev1.PodSet) string {
	counts := func(sets []kueuev1.PodSet) map[kueuev1.PodSetReference]int32 {
		m := map[kueuev1.PodSetReference]int32{}
		for _, ps := range sets {
			m[ps.Name] = ps.Count
		}
		return m
	}
	had, wanted := counts(have), counts(want)
	var changes []string
	for _, ps := range want {
		if n, ok := had[ps.Name]; !ok {
			changes = append(changes, fmt.Sprintf("%s: added with %d", ps.Name, ps.Count))
		} else if n != ps.Count {
			changes = append(changes, fmt.Sprintf("%s: %d -> %d", ps.Name, n, ps.Count))
		}
	}
	for _, ps := range have {
		if _, ok := wanted[ps.Name]; !ok {
			changes = append(changes, fmt.Sprintf("%s: removed", ps.Name))
		}
	}
	return strings.Join(changes, ", ")
}

// AdmittedPodSets is the value of troupev1.AnnotationAdmittedPodSets for an admitted Workload:
// each pod set's count Kueue charges it for (its admitted count, less the pods handed back by
// shrinkWithinAdmission), in the admission's order ("launcher=1,worker=2"). A pod set the
// admission gives no count for is left out (it runs as the job asks).
func AdmittedPodSets(wl *kueuev1.Workload) string {
	a := wl.Status.Admission
	if a == nil {
		return ""
	}
	charged := ChargedPodSets(wl)
	var counts []string
	for _, ps := range a.PodSetAssignments {
		if ps.Count != nil {
			counts = append(counts, fmt.Sprintf("%s=%d", ps.Name, charged[ps.Name]))
		}
	}
	return strings.Join(counts, ",")
}

// admittedCounts are an admitted Workload's pod counts by pod set: each admitted count, the
// spec's where the admission gives none.
func admittedCounts(wl *kueuev1.Workload) map[kueuev1.PodSetReference]int32 {
	out := map[kueuev1.PodSetReference]int32{}
	for _, ps := range wl.Spec.PodSets {
		out[ps.Name] = ps.Count
	}
	if a := wl.Status.Admission; a != nil {
		for _, ps := range a.PodSetAssignments {
			if ps.Count != nil {
				out[ps.Name] = *ps.Count
			}
		}
	}
	return out
}

// ChargedPodSets are the pod counts Kueue charges an admitted Workload for, by pod set: its
// admitted counts less its reclaimable pods.
func ChargedPodSets(wl *kueuev1.Workload) map[kueuev1.PodSetReference]int32 {
	out := admittedCounts(wl)
	for _, rp := range wl.Status.ReclaimablePods {
		out[rp.Name] -= rp.Count
	}
	return out
}

// ReclaimablePods are the pods of an admitted Workload that a job asking want pods (by pod set)
// no longer needs: each pod set's admitted count less the pods wanted or still active, whichever
// is more, never less than already reclaimed (Kueue refuses a smaller count while it holds the
// quota), in the spec's order; pod sets with none are left out.
func ReclaimablePods(wl *kueuev1.Workload, want []kueuev1.PodSet, active map[kueuev1.PodSetReference]int32) []kueuev1.ReclaimablePod {
	admitted := admittedCounts(wl)
	wanted := map[kueuev1.PodSetReference]int32{}
	for _, ps := range want {
		wanted[ps.Name] = ps.Count
	}
	had := map[kueuev1.PodSetReference]int32{}
	for _, rp := range wl.Status.ReclaimablePods {
		had[rp.Name] = rp.Count
	}
	var out []kueuev1.ReclaimablePod
	for _, ps := range wl.Spec.PodSets {
		n := max(admitted[ps.Name]-max(wanted[ps.Name], active[ps.Name]), had[ps.Name], 0)
		if n > 0 {
			out = append(out, kueuev1.ReclaimablePod{Name: ps.Name, Count: n})
		}
	}
	return out
}

// reclaimNote says reclaimable pods in an event ("worker: 1").
func reclaimNote(rp []kueuev1.ReclaimablePod) string {
	parts := make([]string, 0, len(rp))
	for _, p := range rp {
		parts = append(parts, fmt.Sprintf("%s: %d", p.Name, p.Count))
	}
	return strings.Join(parts, ", ")
}

// TopologyRequest is a pod set's request to Kueue's topology-aware scheduling, from Kueue's
// annotations on its template (kueue.x-k8s.io/podset-required-topology, -preferred-topology,
// -unconstrained-topology, -slice-required-topology with -slice-size), with indexLabel, the
// label numbering its pods, so that TAS gives consecutive indexes (and so ranks) neighbouring
// nodes. nil: the template asks nothing and its pods are not numbered.
func TopologyRequest(annotations map[string]string, indexLabel string) (*kueuev1.PodSetTopologyRequest, error) {
	req := &kueuev1.PodSetTopologyRequest{}
	if v, ok := annotations[kueuev1.PodSetRequiredTopologyAnnotation]; ok {
		req.Required = &v
	}
	if v, ok := annotations[kueuev1.PodSetPreferredTopologyAnnotation]; ok {
		req.Preferred = &v
	}
	if v, ok := annotations[kueuev1.PodSetUnconstrainedTopologyAnnotation]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q is not a boolean", kueuev1.PodSetUnconstrainedTopologyAnnotation, v)
		}
		req.Unconstrained = &b
	}
	if v, ok := annotations[kueuev1.PodSetSliceRequiredTopologyAnnotation]; ok {
		size, err := strconv.ParseInt(annotations[kueuev1.PodSetSliceSizeAnnotation], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", kueuev1.PodSetSliceSizeAnnotation, err)
		}
		req.PodSetSliceRequiredTopology, req.PodSetSliceSize = &v, ptr.To(int32(size))
	}
	if indexLabel != "" {
		req.PodIndexLabel = &indexLabel
	}
	// Compared as a whole: Kueue v0.17's request holds a list (podsetSliceRequiredTopologyConstraints).
	if equality.Semantic.DeepEqual(*req, kueuev1.PodSetTopologyRequest{}) {
		return nil, nil
	}
	return req, nil
}

// PodIndexer is a backend whose pods of a worker set run to completion (one batch Job each,
// which numbers nothing) carry their index in a label of its own.
type PodIndexer interface {
	PodIndexLabel() string
}

// podIndexLabel is the label that numbers the pods of ws: a StatefulSet's pod index, else the
// backend's (PodIndexer), else none.
func podIndexLabel(s *engine.Spec, ws *engine.WorkerSet) string {
	if !ws.RunsToCompletion {
		return appsv1.PodIndexLabel
	}
	if b, ok := s.Backend.(PodIndexer); ok {
		return b.PodIndexLabel()
	}
	return ""
}
