package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// checkBounds refuses a Spec larger than troupe's bounds before anything is built from it: the
// hostfile, the exec Role and the PodGroup list or count every pod, so a job admitted before
// the bounds existed (or written past a disabled webhook) must not make the operator build
// objects, and hold lists, of any size it asks for. Counted in int64, where int32 sums wrap.
func checkBounds(s *Spec) error {
	pods := int64(1)
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		pods += int64(ws.Replicas)
		if ws.Slots > troupev1.MaxSlotsPerPod {
			return &SpecError{Reason: troupev1.ReasonTooLarge,
				Err: fmt.Errorf("worker set %s: %d slots per pod, more than %d", ws.Name, ws.Slots, troupev1.MaxSlotsPerPod)}
		}
	}
	if pods > troupev1.MaxPodsPerJob {
		return &SpecError{Reason: troupev1.ReasonTooLarge,
			Err: fmt.Errorf("the job has %d pods, more than %d (the master and every worker); nothing is created", pods, troupev1.MaxPodsPerJob)}
	}
	if s.Master.Slots > troupev1.MaxSlotsPerPod {
		return &SpecError{Reason: troupev1.ReasonTooLarge,
			Err: fmt.Errorf("the master has %d slots, more than %d", s.Master.Slots, troupev1.MaxSlotsPerPod)}
	}
	return nil
}

// checkCredentialRefs refuses a spec that names a job's generated credentials (another job's
// SSH keys or exec account: troupev1.PodSpecCredentialRefs) in its pod templates or its
// required Secrets. The admission webhook refuses such a spec; this holds where the webhook
// is off or set to Ignore: the job reports InvalidSpec and nothing is created.
func checkCredentialRefs(s *Spec) error {
	errs := troupev1.PodSpecCredentialRefs(field.NewPath("master", "template", "spec"), &s.Master.Template.Spec)
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		errs = append(errs, troupev1.PodSpecCredentialRefs(field.NewPath("workerSets").Key(ws.Name).Child("template", "spec"), &ws.Template.Spec)...)
	}
	for _, rs := range s.RequiredSecrets {
		errs = append(errs, troupev1.GeneratedSecretRef(field.NewPath(rs.Field), rs.Name)...)
	}
	return errs.ToAggregate()
}
