package webhooks

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The name rules here are also CEL rules of the CRDs (apis/troupe/v1alpha1, on each kind's root
// type), with the same messages: a spec is refused in the same words whether or not the webhook
// runs.

const (
	// jobNameMessage is the refusal of a job name that is not a DNS-1035 label.
	jobNameMessage = "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (the job's name is also its headless Service's)"
)

// dns1035Label is the CRD's pattern for job names (the length is the derived names' to bound),
// so that both layers refuse the same names in the same words.
var dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// validateJobName checks that the job's name is a DNS-1035 label (it names the headless
// Service) and that the derived names fit, giving the longest name allowed and the derived name
// that sets it.
func validateJobName(name string, derived []troupev1.DerivedName) field.ErrorList {
	path := field.NewPath("metadata", "name")
	var errs field.ErrorList
	if !dns1035Label.MatchString(name) {
		errs = append(errs, field.Invalid(path, name, jobNameMessage))
	}
	if b, ok := troupev1.BindingName(derived); ok && len(b.For(name)) > b.Max {
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("must be no more than %d characters: the %s %q would have %d characters, more than %d",
			b.MaxJobName(), b.What, b.For(name), len(b.For(name)), b.Max)))
	}
	return errs
}

// workerSetNameBudget is how many characters a ChainerJob's name and one of its worker set's
// names may have together: the StatefulSet <job>-workerset-<set> must fit.
const workerSetNameBudget = troupev1.ChainerWorkerSetNameBudget

// validateSetName checks a worker set's name: a non-empty DNS label that, with the job's name,
// is short enough for the StatefulSet <job>-workerset-<set>. The message says how long each of
// the two names may be, given the other.
func validateSetName(path *field.Path, job, set string) field.ErrorList {
	if set == "" {
		return field.ErrorList{field.Required(path, "a worker set needs a name")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(set) {
		errs = append(errs, field.Invalid(path, set, msg))
	}
	if len(job)+len(set) <= workerSetNameBudget {
		return errs
	}
	var fix string
	switch jobTooLong, setTooLong := len(job) >= workerSetNameBudget, len(set) >= workerSetNameBudget; {
	case jobTooLong && setTooLong:
		fix = fmt.Sprintf("the job name and the worker set name may have %d characters together", workerSetNameBudget)
	case jobTooLong:
		fix = fmt.Sprintf("with this worker set, metadata.name may have at most %d characters", workerSetNameBudget-len(set))
	case setTooLong:
		fix = fmt.Sprintf("with this job name, the worker set name may have at most %d characters", workerSetNameBudget-len(job))
	default:
		fix = fmt.Sprintf("shorten metadata.name to at most %d characters or the worker set name to at most %d",
			workerSetNameBudget-len(set), workerSetNameBudget-len(job))
	}
	name := troupev1.ChainerWorkerSetStatefulSetName(job, set)
	return append(errs, field.Invalid(path, set, fmt.Sprintf("StatefulSet %q would have %d characters, more than %d: %s",
		name, len(name), troupev1.MaxStatefulSetNameLength, fix)))
}
