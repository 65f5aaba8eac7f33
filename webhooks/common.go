// Package webhooks holds troupe's admission webhooks: one generic webhook (webhook.go) that
// defaults and validates the jobs of every kind, one file per kind with its own rules (its
// validation function, which the kind's adapter runs too, its update rules and warnings), and
// the rules the kinds share. Validators return every problem at once, each with its field
// path, as a field.ErrorList turned into an Invalid status.
package webhooks

import (
	"fmt"
	"path"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// Options are the operator-wide settings defaulting and validation read.
type Options struct {
	// DefaultGang is the gang provider of jobs that name none.
	DefaultGang troupev1.GangProvider
	// AllowClaimVolumeSources lets claims of runPolicy.storage name the volume they come from
	// (volumeName, dataSource, dataSourceRef: troupev1.ClaimVolumeSourceErrors).
	AllowClaimVolumeSources bool
}

// Defaults are the operator's part of every kind's SetDefaults (apis/troupe/v1alpha1).
func (o Options) Defaults() troupev1.OperatorDefaults {
	return troupev1.OperatorDefaults{Gang: o.DefaultGang}
}

// invalid turns errs into the API's Invalid status for the kind, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: troupev1.GroupVersion.Group, Kind: kind}, name, errs)
}

var (
	cleanPodPolicies = []troupev1.CleanPodPolicy{troupev1.CleanPodPolicyRunning, troupev1.CleanPodPolicyAll, troupev1.CleanPodPolicyNone}
	gangProviders    = []troupev1.GangProvider{troupev1.GangVolcano, troupev1.GangCoscheduling, troupev1.GangNone}
	transports       = []troupev1.MPITransport{troupev1.MPITransportSSH, troupev1.MPITransportKubeExec}
	// mcaName is an Open MPI MCA parameter name: framework_component_param, lower case.
	mcaName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$|^[a-z][a-z0-9]*$`)
)

func oneOf[T ~string](allowed []T, v T) bool {
	for _, a := range allowed {
		if a == v {
			return true
		}
	}
	return false
}

// validateRunPolicy checks the shared run policy of a job whose replicas (for the failure
// policy's rules) are these.
func validateRunPolicy(p *field.Path, rp *troupev1.RunPolicy, replicas jobReplicas) field.ErrorList {
	var errs field.ErrorList
	if c := rp.CleanPodPolicy; c != nil && !oneOf(cleanPodPolicies, *c) {
		errs = append(errs, field.NotSupported(p.Child("cleanPodPolicy"), *c, cleanPodPolicies))
	}
	if rp.CleanPodPolicy != nil && rp.CleanUpWorkers != nil && *rp.CleanUpWorkers != (*rp.CleanPodPolicy != troupev1.CleanPodPolicyNone) {
		errs = append(errs, field.Invalid(p.Child("cleanUpWorkers"), *rp.CleanUpWorkers,
			fmt.Sprintf("disagrees with cleanPodPolicy %q: true means a policy other than None, false means None", *rp.CleanPodPolicy)))
	}
	errs = append(errs, atLeast(p.Child("ttlSecondsAfterFinished"), rp.TTLSecondsAfterFinished, 0)...)
	errs = append(errs, atLeast(p.Child("workerRestartLimit"), rp.WorkerRestartLimit, 1)...)
	errs = append(errs, validateCleanPodPolicyOn(p, rp)...)
	errs = append(errs, validateFailurePolicy(p.Child("failurePolicy"), rp.FailurePolicy, replicas)...)
	errs = append(errs, validateStorage(p.Child("storage"), rp.Storage, replicas)...)
	return append(errs, validateJobLimits(p, rp.BackoffLimit, rp.ActiveDeadlineSeconds)...)
}

// validateFailurePolicy checks the whole-job restarts (0 to troupev1.MaxRestartsLimit) and the
// rules.
func validateFailurePolicy(p *field.Path, fp *troupev1.FailurePolicy, replicas jobReplicas) field.ErrorList {
	if fp == nil {
		return nil
	}
	var errs field.ErrorList
	if n := fp.MaxRestarts; n > troupev1.MaxRestartsLimit {
		errs = append(errs, field.Invalid(p.Child("maxRestarts"), n, fmt.Sprintf("must be no more than %d", troupev1.MaxRestartsLimit)))
	}
	errs = append(errs, atLeast(p.Child("maxRestarts"), &fp.MaxRestarts, 0)...)
	return append(errs, validateFailureRules(p.Child("rules"), fp.Rules, replicas)...)
}

// fixedRunPolicyUpdate refuses a changed failure policy or storage: the pods of a job with a
// failure policy carry their restart attempt, and a count changed under a restart would make
// the attempts disagree; a StatefulSet's claim templates cannot change.
func fixedRunPolicyUpdate(spec *field.Path, o, n *troupev1.RunPolicy) field.ErrorList {
	errs := unchanged(spec.Child("runPolicy", "failurePolicy"), o.FailurePolicy, n.FailurePolicy)
	return append(errs, unchanged(spec.Child("runPolicy", "storage"), o.Storage, n.Storage)...)
}

// validateJobLimits checks the retries and the deadline of a batch Job: the run policy's, or a
// master's or launcher's own.
func validateJobLimits(p *field.Path, backoffLimit *int32, activeDeadlineSeconds *int64) field.ErrorList {
	errs := atLeast(p.Child("backoffLimit"), backoffLimit, 0)
	return append(errs, atLeast(p.Child("activeDeadlineSeconds"), activeDeadlineSeconds, 1)...)
}

// atLeast refuses an optional number below lowest.
func atLeast[T int32 | int64](p *field.Path, v *T, lowest T) field.ErrorList {
	if v == nil || *v >= lowest {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *v, fmt.Sprintf("must be %d or more", lowest))}
}

// validateSchedulingPolicy checks the shared scheduling policy of a job of totalPods pods, whose
// master the kind calls master ("master" or "launcher").
func validateSchedulingPolicy(p *field.Path, sp *troupev1.SchedulingPolicy, totalPods int64, master string) field.ErrorList {
	var errs field.ErrorList
	if g := sp.Gang; g != nil && !oneOf(gangProviders, *g) {
		errs = append(errs, field.NotSupported(p.Child("gang"), *g, gangProviders))
	}
	if m := sp.MinAvailable; m != nil && (*m < 1 || int64(*m) > totalPods) {
		errs = append(errs, field.Invalid(p.Child("minAvailable"), *m,
			fmt.Sprintf("must be between 1 and the job's %d pods (the %s and every worker)", totalPods, master)))
	}
	return append(errs, atLeast(p.Child("scheduleTimeoutSeconds"), sp.ScheduleTimeoutSeconds, 1)...)
}

// validateLaunch checks the transport, SSH options and the launcher's wait.
func validateLaunch(p *field.Path, l *troupev1.MPILaunch) field.ErrorList {
	var errs field.ErrorList
	if l.Transport != "" && !oneOf(transports, l.Transport) {
		errs = append(errs, field.NotSupported(p.Child("transport"), l.Transport, transports))
	}
	if s := l.SSH; s != nil {
		if s.SSHDPath != "" && !path.IsAbs(s.SSHDPath) {
			errs = append(errs, field.Invalid(p.Child("ssh", "sshdPath"), s.SSHDPath, "must be an absolute path"))
		}
		if v := s.Port; v != nil && (*v < 1 || *v > 65535) {
			errs = append(errs, field.Invalid(p.Child("ssh", "port"), *v, "must be between 1 and 65535"))
		}
	}
	return append(errs, atLeast(p.Child("waitForWorkersTimeoutSeconds"), l.WaitForWorkersTimeoutSeconds, 1)...)
}

// validateSlots checks the slots of one pod set: the explicit value at p (1 to
// troupev1.MaxSlotsPerPod), or when there is none the count the main container's GPU limit
// gives, so that defaulting it into p never makes a valid job invalid.
func validateSlots(p *field.Path, slots *int32, tmpl *corev1.PodTemplateSpec, mainContainer string) field.ErrorList {
	if slots == nil {
		if derived := mpi.Slots(tmpl, mainContainer, nil); derived > troupev1.MaxSlotsPerPod {
			return field.ErrorList{field.Invalid(p, derived, fmt.Sprintf(
				"the accelerator limit of container %q gives %d MPI processes per pod, more than %d: set the slots explicitly",
				mainContainer, derived, troupev1.MaxSlotsPerPod))}
		}
		return nil
	}
	if *slots > troupev1.MaxSlotsPerPod {
		return field.ErrorList{field.Invalid(p, *slots, fmt.Sprintf("must be no more than %d MPI processes per pod", troupev1.MaxSlotsPerPod))}
	}
	return atLeast(p, slots, 1)
}

// validateReplicas checks a worker count: 1 (suspend the job to stop its workers) to
// troupev1.MaxWorkerReplicas.
func validateReplicas(p *field.Path, replicas int32) field.ErrorList {
	switch {
	case replicas < 1:
		return field.ErrorList{field.Invalid(p, replicas, "must be 1 or more; suspend the job to stop its workers")}
	case replicas > troupev1.MaxWorkerReplicas:
		return field.ErrorList{field.Invalid(p, replicas, fmt.Sprintf("must be no more than %d: a job has at most %d pods, the master included",
			troupev1.MaxWorkerReplicas, troupev1.MaxPodsPerJob))}
	}
	return nil
}

// validatePodCount checks the pods of a whole job (the master and every worker).
func validatePodCount(p *field.Path, totalPods int64) field.ErrorList {
	if totalPods <= troupev1.MaxPodsPerJob {
		return nil
	}
	return field.ErrorList{field.Invalid(p, totalPods, fmt.Sprintf("the job would have %d pods, more than %d (the master and every worker)",
		totalPods, troupev1.MaxPodsPerJob))}
}

// validateMCA checks Open MPI parameter names; the dialect check lives with the kind.
func validateMCA(p *field.Path, mca map[string]string) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(mca))
	for k := range mca {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !mcaName.MatchString(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, "must be an Open MPI parameter name such as btl or btl_tcp_if_include"))
		}
	}
	return errs
}
