package kueue

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Kueue's marks on the pods of a pod set placed by topology-aware scheduling (TAS): its
// ungater finds the pods of a Workload's pod set by them, removes the gate and adds each pod's
// domain to its nodeSelector.
const (
	// LabelPodSet names the pod's pod set.
	LabelPodSet = "kueue.x-k8s.io/podset"
	// AnnotationWorkload names the pod's Workload.
	AnnotationWorkload = kueuev1.WorkloadAnnotation
	// TopologySchedulingGate holds a pod until the ungater gives it its domain.
	TopologySchedulingGate = kueuev1.TopologySchedulingGate
)

// Placement is what an admission asks of one pod set's pods: the node labels of the
// ResourceFlavors Kueue assigned to its resources (a nodeSelector) and their tolerations; under
// TAS, the marks the topology ungater needs (label, annotation, scheduling gate); and what the
// admission checks ask (their podSetUpdates: labels, annotations, nodeSelector, tolerations).
type Placement struct {
	NodeSelector    map[string]string
	Tolerations     []corev1.Toleration
	Labels          map[string]string
	Annotations     map[string]string
	SchedulingGates []corev1.PodSchedulingGate
}

// Placements returns the placement of each pod set of an admitted Workload, by pod set name;
// flavors are the ResourceFlavors by name. A flavor the admission names and flavors lacks is an
// error, and so is an admission check that asks a key another source set to another value.
func Placements(wl *kueuev1.Workload, flavors map[string]*kueuev1.ResourceFlavor) (map[string]Placement, error) {
	out := map[string]Placement{}
	if wl.Status.Admission == nil {
		return out, nil
	}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		var p Placement
		// Several resources may share a flavor; each flavor counts once, in name order.
		names := map[string]bool{}
		for _, f := range a.Flavors {
			names[string(f)] = true
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			rf, ok := flavors[name]
			if !ok {
				return nil, fmt.Errorf("ResourceFlavor %q of pod set %q not found", name, a.Name)
			}
			p.NodeSelector = union(p.NodeSelector, rf.Spec.NodeLabels)
			p.Tolerations = addTolerations(p.Tolerations, rf.Spec.Tolerations)
		}
		if a.TopologyAssignment != nil {
			p.Labels = union(p.Labels, map[string]string{LabelPodSet: string(a.Name)})
			p.Annotations = union(p.Annotations, map[string]string{AnnotationWorkload: wl.Name})
			if req := podSetTopologyRequest(wl, a.Name); req == nil || (req.Required == nil && req.Preferred == nil && req.Unconstrained == nil) {
				// Placed by TAS without asking (a TAS-only ClusterQueue): the ungater
				// acts only on pods that say they are TAS's.
				p.Annotations[kueuev1.PodSetUnconstrainedTopologyAnnotation] = "true"
			}
			p.SchedulingGates = []corev1.PodSchedulingGate{{Name: TopologySchedulingGate}}
		}
		for _, check := range wl.Status.AdmissionChecks {
			for _, u := range check.PodSetUpdates {
				if u.Name != a.Name {
					continue
				}
				for _, c := range []struct {
					field      string
					have, more map[string]string
				}{{"labels", p.Labels, u.Labels}, {"annotations", p.Annotations, u.Annotations}, {"nodeSelector", p.NodeSelector, u.NodeSelector}} {
					if k, ok := conflict(c.have, c.more); ok {
						return nil, fmt.Errorf("admission check %s asks pod set %s for %s %s=%s, which is already %s",
							check.Name, a.Name, c.field, k, c.more[k], c.have[k])
					}
				}
				p.Labels = union(p.Labels, u.Labels)
				p.Annotations = union(p.Annotations, u.Annotations)
				p.NodeSelector = union(p.NodeSelector, u.NodeSelector)
				p.Tolerations = addTolerations(p.Tolerations, u.Tolerations)
			}
		}
		out[string(a.Name)] = p
	}
	return out, nil
}

// podSetTopologyRequest is the topology request of the Workload's pod set name, or nil.
func podSetTopologyRequest(wl *kueuev1.Workload, name kueuev1.PodSetReference) *kueuev1.PodSetTopologyRequest {
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].Name == name {
			return wl.Spec.PodSets[i].TopologyRequest
		}
	}
	return nil
}

// conflict returns a key that more sets to another value than have.
func conflict(have, more map[string]string) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(more)) {
		if v, ok := have[k]; ok && v != more[k] {
			return k, true
		}
	}
	return "", false
}

// union returns m with the keys of more added (a new map when m is nil and more is not empty).
func union(m, more map[string]string) map[string]string {
	if len(more) == 0 {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, more)
	return m
}

// addTolerations returns have with each toleration of more it lacks appended.
func addTolerations(have, more []corev1.Toleration) []corev1.Toleration {
	for _, t := range more {
		if !slices.ContainsFunc(have, func(h corev1.Toleration) bool { return equality.Semantic.DeepEqual(h, t) }) {
			have = append(have, t)
		}
	}
	return have
}

// ApplyPlacements adds each pod set's placement to its template in the job's spec: its labels,
// annotations and node labels over the template's own, its tolerations and scheduling gates
// after the template's. A launcher the operator generates has no template; it is built from the
// workers' and goes where they go (their TAS marks made its own pod set's by the adapter).
func ApplyPlacements(job troupev1.QueuedJob, placements map[string]Placement) {
	for _, ps := range job.PodSets() {
		p, ok := placements[ps.Name]
		if !ok {
			continue
		}
		job.EditPodSetTemplate(ps.Name, func(t *corev1.PodTemplateSpec) {
			t.Labels = union(t.Labels, p.Labels)
			t.Annotations = union(t.Annotations, p.Annotations)
			t.Spec.NodeSelector = union(t.Spec.NodeSelector, p.NodeSelector)
			t.Spec.Tolerations = addTolerations(t.Spec.Tolerations, p.Tolerations)
			for _, g := range p.SchedulingGates {
				if !slices.Contains(t.Spec.SchedulingGates, g) {
					t.Spec.SchedulingGates = append(t.Spec.SchedulingGates, g)
				}
			}
		})
	}
}

// RestorePlacements puts what a placement writes of each pod set's template (labels,
// annotations, nodeSelector, tolerations, scheduling gates) back to what it was when the
// Workload was made (its pod sets' templates), and reports whether it changed anything.
func RestorePlacements(job troupev1.QueuedJob, wl *kueuev1.Workload) bool {
	changed := false
	for _, ps := range wl.Spec.PodSets {
		orig := &ps.Template
		job.EditPodSetTemplate(string(ps.Name), func(t *corev1.PodTemplateSpec) {
			if equality.Semantic.DeepEqual(t.Labels, orig.Labels) &&
				equality.Semantic.DeepEqual(t.Annotations, orig.Annotations) &&
				equality.Semantic.DeepEqual(t.Spec.NodeSelector, orig.Spec.NodeSelector) &&
				equality.Semantic.DeepEqual(t.Spec.Tolerations, orig.Spec.Tolerations) &&
				equality.Semantic.DeepEqual(t.Spec.SchedulingGates, orig.Spec.SchedulingGates) {
				return
			}
			t.Labels, t.Annotations = maps.Clone(orig.Labels), maps.Clone(orig.Annotations)
			t.Spec.NodeSelector = maps.Clone(orig.Spec.NodeSelector)
			t.Spec.Tolerations = slices.Clone(orig.Spec.Tolerations)
			t.Spec.SchedulingGates = slices.Clone(orig.Spec.SchedulingGates)
			changed = true
		})
	}
	return changed
}
