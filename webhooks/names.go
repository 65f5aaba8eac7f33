package webhooks

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// maxLabelLength bounds a DNS label: a Service name, a pod host name, a label value.
	maxLabelLength = validation.DNS1123LabelMaxLength
	// maxStatefulSetName bounds a StatefulSet's name: its pods carry the label
	// controller-revision-hash=<name>-<10-character hash>, which must fit a label value.
	maxStatefulSetName = maxLabelLength - 11
)

// derivedName is a name the operator or a controller derives from the job's name: its length
// must stay within max.
type derivedName struct {
	what  string // for the message, e.g. `StatefulSet "J-workerset-ws0"`
	extra int    // characters added to the job name
	max   int
}

// statefulSetNames returns the limits for a StatefulSet named <job><suffix> with replicas pods
// <job><suffix>-<ordinal>, which are also the pods' host names.
func statefulSetNames(suffix string, replicas int32) []derivedName {
	last := strconv.Itoa(int(max(replicas, 1) - 1))
	return []derivedName{
		{what: fmt.Sprintf("StatefulSet \"<name>%s\"", suffix), extra: len(suffix), max: maxStatefulSetName},
		{what: fmt.Sprintf("pod host name \"<name>%s-%s\"", suffix, last), extra: len(suffix) + 1 + len(last), max: maxLabelLength},
	}
}

// validateJobName checks that the job's name is a DNS-1035 label (it names the headless
// Service) and that every name derived from it fits, and reports the longest name allowed.
func validateJobName(name string, derived []derivedName) field.ErrorList {
	path := field.NewPath("metadata", "name")
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(path, name, msg+" (the job's name is also its headless Service's)"))
	}
	longest, limit := maxLabelLength, ""
	for _, d := range derived {
		if allowed := d.max - d.extra; allowed < longest {
			longest, limit = allowed, fmt.Sprintf("%s must fit in %d characters", d.what, d.max)
		}
	}
	if len(name) > longest {
		errs = append(errs, field.Invalid(path, name,
			fmt.Sprintf("must be no more than %d characters: %s", longest, limit)))
	}
	return errs
}

// validateSetName checks a worker set's name: a non-empty DNS label short enough for the names
// derived from it (StatefulSet <job>-workerset-<set>, pods <job>-workerset-<set>-<ordinal>).
func validateSetName(path *field.Path, job, set string, replicas int32) field.ErrorList {
	var errs field.ErrorList
	if set == "" {
		return field.ErrorList{field.Required(path, "a worker set needs a name")}
	}
	for _, msg := range validation.IsDNS1123Label(set) {
		errs = append(errs, field.Invalid(path, set, msg))
	}
	for _, d := range statefulSetNames("-workerset-"+set, replicas) {
		if total := len(job) + d.extra; total > d.max {
			longest := d.max - (total - len(set))
			what := strings.ReplaceAll(d.what, "<name>", job)
			errs = append(errs, field.Invalid(path, set,
				fmt.Sprintf("must be no more than %d characters for this job: %s must fit in %d characters", max(longest, 0), what, d.max)))
			break
		}
	}
	return errs
}
