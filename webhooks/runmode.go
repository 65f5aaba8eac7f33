package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Run modes and the T9k scheduler section of MPIJob and HorovodJob. Debug's default commands
// are not written into the spec: runMode.debug cannot change once the job exists, so a default
// added by a later defaulting (say, of a job created while the webhook was down) would read as
// a change and refuse every update. The operator applies them (docs/kinds.md).

// Replica types of MPIJob and HorovodJob, and of ChainerJob.
var (
	mpiReplicaTypes     = []troupev1.ReplicaType{troupev1.ReplicaLauncher, troupev1.ReplicaWorker}
	chainerReplicaTypes = []troupev1.ReplicaType{troupev1.ReplicaMaster, troupev1.ReplicaWorker}
)

// validateRunMode checks the replica types of the debug and resume specs.
func validateRunMode(p *field.Path, rm *troupev1.RunMode, types []troupev1.ReplicaType) field.ErrorList {
	if rm == nil {
		return nil
	}
	var errs field.ErrorList
	if d := rm.Debug; d != nil {
		specs := p.Child("debug", "replicaSpecs")
		seen := map[troupev1.ReplicaType]bool{}
		for i, r := range d.ReplicaSpecs {
			errs = append(errs, validateReplicaType(specs.Index(i).Child("type"), r.Type, types, seen)...)
		}
	}
	if ps := rm.Pause; ps != nil {
		specs := p.Child("pause", "resumeSpecs")
		seen := map[troupev1.ReplicaType]bool{}
		for i, r := range ps.ResumeSpecs {
			errs = append(errs, validateReplicaType(specs.Index(i).Child("type"), r.Type, types, seen)...)
		}
	}
	return errs
}

func validateReplicaType(p *field.Path, t troupev1.ReplicaType, types []troupev1.ReplicaType, seen map[troupev1.ReplicaType]bool) field.ErrorList {
	switch {
	case !oneOf(types, t):
		return field.ErrorList{field.NotSupported(p, t, types)}
	case seen[t]:
		return field.ErrorList{field.Duplicate(p, t)}
	}
	seen[t] = true
	return nil
}

// validateRunModeUpdate refuses a change of debug mode or of the resume specs; pause.enabled
// may change at any time.
func validateRunModeUpdate(p *field.Path, o, n *troupev1.RunMode) field.ErrorList {
	debug := func(rm *troupev1.RunMode) *troupev1.DebugMode {
		if rm == nil {
			return nil
		}
		return rm.Debug
	}
	resume := func(rm *troupev1.RunMode) []troupev1.ResumeSpec {
		if rm == nil || rm.Pause == nil {
			return nil
		}
		return rm.Pause.ResumeSpecs
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(debug(o), debug(n)) {
		errs = append(errs, field.Forbidden(p.Child("debug"), "cannot change once the job exists; create a job in debug mode instead"))
	}
	if !equality.Semantic.DeepEqual(resume(o), resume(n)) {
		errs = append(errs, field.Forbidden(p.Child("pause", "resumeSpecs"),
			"cannot change once the job exists; set them when you create the job (pause.enabled may change at any time)"))
	}
	return errs
}

// validateT9kScheduler refuses a T9k scheduler section that contradicts the scheduling policy.
func validateT9kScheduler(spec *field.Path, p *troupev1.MPIProgramSpec) field.ErrorList {
	if p.Scheduler == nil || p.Scheduler.T9kScheduler == nil {
		return nil
	}
	t := p.Scheduler.T9kScheduler
	path := spec.Child("scheduler", "t9kScheduler")
	sp := p.SchedulingPolicy
	var errs field.ErrorList
	if t.Queue != "" && sp.Queue != "" && sp.Queue != t.Queue {
		errs = append(errs, field.Invalid(path.Child("queue"), t.Queue,
			fmt.Sprintf("contradicts schedulingPolicy.queue %q; give the queue once", sp.Queue)))
	}
	if t.Priority != nil {
		if *t.Priority < 0 || *t.Priority > 1_000_000_000 {
			errs = append(errs, field.Invalid(path.Child("priority"), *t.Priority, "must be between 0 and 1000000000"))
		} else if want := troupev1.T9kPriorityClassName(*t.Priority); sp.PriorityClassName != "" && sp.PriorityClassName != want {
			errs = append(errs, field.Invalid(path.Child("priority"), *t.Priority,
				fmt.Sprintf("selects the PriorityClass %q, which contradicts schedulingPolicy.priorityClassName %q; give the priority once", want, sp.PriorityClassName)))
		}
	}
	return errs
}

// t9kSchedulerWarnings tells the user when a T9k queue has no effect: only Volcano's PodGroup
// has a queue.
func t9kSchedulerWarnings(p *troupev1.MPIProgramSpec) admission.Warnings {
	if p.Scheduler == nil || p.Scheduler.T9kScheduler == nil || p.Scheduler.T9kScheduler.Queue == "" {
		return nil
	}
	if g := ptr.Deref(p.SchedulingPolicy.Gang, troupev1.GangNone); g != troupev1.GangVolcano {
		return admission.Warnings{fmt.Sprintf(
			"spec.scheduler.t9kScheduler.queue: the gang provider %s has no queues; the queue is ignored (use schedulingPolicy.gang Volcano)", g)}
	}
	return nil
}
