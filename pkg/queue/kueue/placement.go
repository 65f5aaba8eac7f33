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

// Placement is where Kueue puts one pod set: the node labels of the ResourceFlavors it assigned
// to the pod set's resources, as a nodeSelector, and the flavors' tolerations.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// Placements returns the placement of each pod set of an admission, by pod set name; flavors
// are the ResourceFlavors by name. A flavor the admission names and flavors lacks is an error.
func Placements(adm *kueuev1.Admission, flavors map[string]*kueuev1.ResourceFlavor) (map[string]Placement, error) {
	out := map[string]Placement{}
	for _, a := range adm.PodSetAssignments {
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
			if len(rf.Spec.NodeLabels) > 0 && p.NodeSelector == nil {
				p.NodeSelector = map[string]string{}
			}
			maps.Copy(p.NodeSelector, rf.Spec.NodeLabels)
			for _, t := range rf.Spec.Tolerations {
				if !slices.ContainsFunc(p.Tolerations, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, t) }) {
					p.Tolerations = append(p.Tolerations, t)
				}
			}
		}
		out[string(a.Name)] = p
	}
	return out, nil
}

// ApplyPlacements adds each pod set's placement to its template in the job's spec: the node
// labels over the template's own nodeSelector, the tolerations after its own. A launcher the
// operator generates has no template; it is built from the workers' and goes where they go.
func ApplyPlacements(job troupev1.QueuedJob, placements map[string]Placement) {
	for _, ps := range job.PodSets() {
		p, ok := placements[ps.Name]
		if !ok {
			continue
		}
		job.EditPodSetTemplate(ps.Name, func(t *corev1.PodTemplateSpec) {
			if len(p.NodeSelector) > 0 {
				if t.Spec.NodeSelector == nil {
					t.Spec.NodeSelector = map[string]string{}
				}
				maps.Copy(t.Spec.NodeSelector, p.NodeSelector)
			}
			for _, tol := range p.Tolerations {
				if !slices.ContainsFunc(t.Spec.Tolerations, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, tol) }) {
					t.Spec.Tolerations = append(t.Spec.Tolerations, tol)
				}
			}
		})
	}
}

// RestorePlacements puts the nodeSelector and tolerations of each pod set's template back to
// what they were when the Workload was made (its pod sets' templates), and reports whether it
// changed anything.
func RestorePlacements(job troupev1.QueuedJob, wl *kueuev1.Workload) bool {
	changed := false
	for _, ps := range wl.Spec.PodSets {
		orig := &ps.Template.Spec
		job.EditPodSetTemplate(string(ps.Name), func(t *corev1.PodTemplateSpec) {
			if equality.Semantic.DeepEqual(t.Spec.NodeSelector, orig.NodeSelector) &&
				equality.Semantic.DeepEqual(t.Spec.Tolerations, orig.Tolerations) {
				return
			}
			t.Spec.NodeSelector = maps.Clone(orig.NodeSelector)
			t.Spec.Tolerations = slices.Clone(orig.Tolerations)
			changed = true
		})
	}
	return changed
}
