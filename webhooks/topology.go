package webhooks

import (
	"fmt"
	"strconv"
	"strings"

	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// validateTopologyAnnotations checks Kueue's topology-aware scheduling annotations of a pod
// template (path is its metadata.annotations) as Kueue checks them on its own kinds, so that a
// job Kueue could never place is refused when it is written, not left queued: at most one of
// required, preferred and unconstrained; a level named by a valid node label key; a boolean
// unconstrained; a slice level and a slice size of at least 1 together.
func validateTopologyAnnotations(path *field.Path, ann map[string]string) field.ErrorList {
	var errs field.ErrorList
	var asked []string
	for _, k := range []string{kueuev1.PodSetRequiredTopologyAnnotation, kueuev1.PodSetPreferredTopologyAnnotation, kueuev1.PodSetUnconstrainedTopologyAnnotation} {
		if _, ok := ann[k]; ok {
			asked = append(asked, k)
		}
	}
	if len(asked) > 1 {
		errs = append(errs, field.Invalid(path.Key(asked[1]), ann[asked[1]],
			fmt.Sprintf("a pod set asks for one topology only; it also has %s", asked[0])))
	}
	for _, k := range []string{kueuev1.PodSetRequiredTopologyAnnotation, kueuev1.PodSetPreferredTopologyAnnotation, kueuev1.PodSetSliceRequiredTopologyAnnotation} {
		level, ok := ann[k]
		if !ok {
			continue
		}
		var why []string
		for _, e := range metavalidation.ValidateLabelName(level, path.Key(k)) {
			why = append(why, e.Detail)
		}
		if len(why) > 0 {
			errs = append(errs, field.Invalid(path.Key(k), level,
				"must name a level of the Topology, the node label key of that level (for example topology.kubernetes.io/zone): "+strings.Join(why, "; ")))
		}
	}
	if v, ok := ann[kueuev1.PodSetUnconstrainedTopologyAnnotation]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, field.Invalid(path.Key(kueuev1.PodSetUnconstrainedTopologyAnnotation), v, "must be true or false"))
		}
	}
	_, slice := ann[kueuev1.PodSetSliceRequiredTopologyAnnotation]
	size, sized := ann[kueuev1.PodSetSliceSizeAnnotation]
	switch {
	case slice && !sized:
		errs = append(errs, field.Required(path.Key(kueuev1.PodSetSliceSizeAnnotation),
			"the number of pods of a slice, needed with "+kueuev1.PodSetSliceRequiredTopologyAnnotation))
	case sized && !slice:
		errs = append(errs, field.Invalid(path.Key(kueuev1.PodSetSliceSizeAnnotation), size,
			"means nothing without "+kueuev1.PodSetSliceRequiredTopologyAnnotation))
	case sized:
		if n, err := strconv.ParseInt(size, 10, 32); err != nil || n < 1 {
			errs = append(errs, field.Invalid(path.Key(kueuev1.PodSetSliceSizeAnnotation), size, "must be a whole number of pods, at least 1"))
		}
	}
	return errs
}
