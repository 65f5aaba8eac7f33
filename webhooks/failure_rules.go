package webhooks

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// jobReplicas are the replicas of a job as the failure policy's rules name them
// (onReplicas): the master's type ("launcher" or "master", "" without a master) and the worker
// sets.
type jobReplicas struct {
	master  string
	workers []string
}

func (r jobReplicas) names() []string {
	if r.master == "" {
		return r.workers
	}
	return append([]string{r.master}, r.workers...)
}

var (
	failureActions = []troupev1.FailureAction{troupev1.FailJobAction, troupev1.RestartJobAction,
		troupev1.RestartJobAndIgnoreMaxRestartsAction, troupev1.IgnoreAction}
	failureReasons = []troupev1.FailureReason{troupev1.FailureEvicted, troupev1.FailurePreempted, troupev1.FailureNodeLost,
		troupev1.FailureOOMKilled, troupev1.FailureDeadlineExceeded, troupev1.FailureDeleted, troupev1.FailureCrashLoop, troupev1.FailureError, troupev1.FailureStalled}
)

// validateFailureRules checks the failure policy's rules: known actions, reasons and replicas,
// exit codes that do not overlap, and Ignore only for workers.
func validateFailureRules(p *field.Path, rules []troupev1.FailureRule, replicas jobReplicas) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range rules {
		r, rp := &rules[i], p.Index(i)
		if names[r.Name] {
			errs = append(errs, field.Duplicate(rp, r.Name)) // as the CRD's list map says it
		}
		names[r.Name] = true
		if !oneOf(failureActions, r.Action) {
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, failureActions))
		}
		for j, reason := range r.OnReasons {
			if !oneOf(failureReasons, reason) {
				errs = append(errs, field.NotSupported(rp.Child("onReasons").Index(j), reason, failureReasons))
			}
		}
		for j, name := range r.OnReplicas {
			if !slices.Contains(replicas.names(), name) {
				errs = append(errs, field.NotSupported(rp.Child("onReplicas").Index(j), name, replicas.names()))
			}
		}
		if m := r.OnExitCodes; m != nil {
			errs = append(errs, validateExitCodes(rp.Child("onExitCodes"), m)...)
		}
		switch {
		case r.Action == troupev1.IgnoreAction && (len(r.OnReplicas) == 0 || (replicas.master != "" && slices.Contains(r.OnReplicas, replicas.master))):
			errs = append(errs, field.Invalid(rp.Child("action"), r.Action,
				fmt.Sprintf("Ignore is for workers: a failed %s ends its attempt; name worker sets in onReplicas (%s)",
					replicas.master, strings.Join(replicas.workers, ", "))))
		}
	}
	return errs
}

// validateElasticFailurePolicy refuses what would restart an elastic job as a whole: framework
// (elastic Horovod, torch elastic) keeps training as workers come and go, so its failure policy
// may only Ignore a lost worker or fail the job (FailJob), with maxRestarts 0. The words are the
// CRD rule's.
func validateElasticFailurePolicy(p *field.Path, fp *troupev1.FailurePolicy, framework string) field.ErrorList {
	if fp == nil {
		return nil
	}
	why := framework + " keeps training when workers come and go and is not restarted as a whole"
	var errs field.ErrorList
	if fp.MaxRestarts != 0 {
		errs = append(errs, field.Invalid(p.Child("maxRestarts"), fp.MaxRestarts, why+": must be 0"))
	}
	for i, r := range fp.Rules {
		if r.Action == troupev1.RestartJobAction || r.Action == troupev1.RestartJobAndIgnoreMaxRestartsAction {
			errs = append(errs, field.Invalid(p.Child("rules").Index(i).Child("action"), r.Action, why+": a rule may Ignore a lost worker or FailJob"))
		}
	}
	return errs
}

// validateExitCodes refuses exit codes outside 1-255 and values or ranges that overlap: two
// ways of saying one code are a mistake in one of them.
func validateExitCodes(p *field.Path, m *troupev1.ExitCodeMatch) field.ErrorList {
	var errs field.ErrorList
	if len(m.Values) == 0 && len(m.Ranges) == 0 {
		errs = append(errs, field.Required(p, "give values or ranges of exit codes"))
	}
	said := map[int32]string{} // exit code: the value or range that said it
	for i, v := range m.Values {
		switch before, ok := said[v]; {
		case v < 1 || v > 255:
			errs = append(errs, field.Invalid(p.Child("values").Index(i), v, "an exit code is 1 to 255 (0 is success)"))
		case ok:
			errs = append(errs, field.Invalid(p.Child("values").Index(i), v, fmt.Sprintf("overlaps %s: exit code %d is in both", before, v)))
		default:
			said[v] = fmt.Sprint(v)
		}
	}
	for i, r := range m.Ranges {
		at := p.Child("ranges").Index(i)
		if r.From < 1 || r.To > 255 || r.From > r.To {
			errs = append(errs, field.Invalid(at, fmt.Sprintf("%d-%d", r.From, r.To), "from must not be above to, both within 1 to 255"))
			continue
		}
		for c := r.From; c <= r.To; c++ {
			if before, ok := said[c]; ok {
				errs = append(errs, field.Invalid(at, fmt.Sprintf("%d-%d", r.From, r.To), fmt.Sprintf("overlaps %s: exit code %d is in both", before, c)))
				break
			}
		}
		for c := r.From; c <= r.To; c++ {
			said[c] = fmt.Sprintf("%d-%d", r.From, r.To)
		}
	}
	return errs
}
