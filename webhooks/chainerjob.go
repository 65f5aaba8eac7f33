package webhooks

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-chainerjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=chainerjobs,verbs=create;update,versions=v1alpha1,name=mchainerjob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-chainerjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=chainerjobs,verbs=create;update,versions=v1alpha1,name=vchainerjob.troupe.dev,admissionReviewVersions=v1

// ChainerJob defaults and validates ChainerJobs.
type ChainerJob = Webhook[*troupev1.ChainerJob, chainerJobRules]

// chainerJobRules are ChainerJob's own admission rules.
type chainerJobRules struct{}

var chainerBackends = []troupev1.ChainerBackend{troupev1.ChainerBackendMPI, troupev1.ChainerBackendNone}

// Validate is ValidateChainerJob, which the adapter runs too.
func (chainerJobRules) Validate(job *troupev1.ChainerJob) field.ErrorList {
	return ValidateChainerJob(job)
}

// Warnings tell what troupe changes or ignores of what the user wrote.
func (chainerJobRules) Warnings(job *troupev1.ChainerJob) admission.Warnings {
	return gitHostKeyWarnings(field.NewPath("spec", "appCodesToSync"), job.Spec.AppCodesToSync)
}

// ValidateChainerJob returns every problem of a ChainerJob's spec.
func ValidateChainerJob(job *troupev1.ChainerJob) field.ErrorList {
	s := &job.Spec
	spec := field.NewPath("spec")
	var errs field.ErrorList

	// Summed in int64: a replica count past its bound must not wrap the sum.
	totalPods := int64(1)
	for _, ws := range s.WorkerSets {
		totalPods += int64(ptr.Deref(ws.Replicas, 1))
	}
	errs = append(errs, validateJobName(job.Name, job.DerivedNames())...)

	if s.Backend != "" && !oneOf(chainerBackends, s.Backend) {
		errs = append(errs, field.NotSupported(spec.Child("backend"), s.Backend, chainerBackends))
	}
	master := spec.Child("master")
	errs = append(errs, validateTemplate(master.Child("template"), &s.Master.Template, launcherPod, troupev1.ChainerMainContainer)...)
	errs = append(errs, validateSlots(master.Child("mpiConfig", "slots"), slotsOf(s.Master.MPIConfig), &s.Master.Template, troupev1.ChainerMainContainer)...)
	errs = append(errs, validateJobLimits(master, s.Master.BackoffLimit, s.Master.ActiveDeadlineSeconds)...)

	switch {
	case s.Backend == troupev1.ChainerBackendNone && len(s.WorkerSets) > 0:
		errs = append(errs, field.Forbidden(spec.Child("workerSets"),
			fmt.Sprintf("backend %q runs the master alone: remove the worker sets or use backend %q", troupev1.ChainerBackendNone, troupev1.ChainerBackendMPI)))
	}
	for _, name := range s.WorkerSetNames() {
		ws := s.WorkerSets[name]
		p := spec.Child("workerSets").Key(name)
		replicas := ptr.Deref(ws.Replicas, 1)
		errs = append(errs, validateSetName(p, job.Name, name)...)
		errs = append(errs, validateReplicas(p.Child("replicas"), replicas)...)
		errs = append(errs, validateSlots(p.Child("mpiConfig", "slots"), slotsOf(ws.MPIConfig), &ws.Template, troupev1.ChainerMainContainer)...)
		errs = append(errs, validateTemplate(p.Child("template"), &ws.Template, workerPod, troupev1.ChainerMainContainer)...)
	}
	errs = append(errs, validateLaunch(spec, &s.MPILaunch)...)
	errs = append(errs, validateUserInputs(spec, s.AppCodesToSync, &s.MPILaunch, troupev1.MPITransportKubeExec, chainerTemplates(s))...)
	errs = append(errs, validateRunPolicy(spec.Child("runPolicy"), &s.RunPolicy, jobReplicas{master: string(troupev1.ReplicaMaster), workers: s.WorkerSetNames()})...)
	errs = append(errs, validatePodCount(spec.Child("workerSets"), totalPods)...)
	errs = append(errs, validateSchedulingPolicy(spec.Child("schedulingPolicy"), &s.SchedulingPolicy, totalPods, "master")...)
	errs = append(errs, validateRunMode(spec.Child("runMode"), s.RunMode, chainerReplicaTypes)...)
	return append(errs, validateQueued(job)...)
}

// ValidateUpdate refuses changes to what is fixed once a ChainerJob exists: the
// templates (but see validateTemplateUpdate), the worker sets' names and number, the backend,
// the transport and the gang provider. Replicas, suspend and the TTL may change.
func (chainerJobRules) ValidateUpdate(old, job *troupev1.ChainerJob) field.ErrorList {
	spec := field.NewPath("spec")
	o, n := &old.Spec, &job.Spec
	suspended := wasSuspended(o.RunPolicy)
	var errs field.ErrorList
	errs = append(errs, immutable(spec.Child("backend"), o.Backend, n.Backend)...)
	errs = append(errs, immutable(spec.Child("transport"), o.Transport, n.Transport)...)
	errs = append(errs, immutable(spec.Child("schedulingPolicy", "gang"), ptr.Deref(o.SchedulingPolicy.Gang, ""), ptr.Deref(n.SchedulingPolicy.Gang, ""))...)
	errs = append(errs, unchanged(spec.Child("ssh"), o.SSH, n.SSH)...)
	errs = append(errs, validateRunModeUpdate(spec.Child("runMode"), o.RunMode, n.RunMode)...)
	errs = append(errs, unchanged(spec.Child("appCodesToSync"), o.AppCodesToSync, n.AppCodesToSync)...)
	errs = append(errs, fixedRunPolicyUpdate(spec, &o.RunPolicy, &n.RunPolicy)...)
	errs = append(errs, validateTemplateUpdate(spec.Child("master", "template"), &o.Master.Template, &n.Master.Template, suspended)...)
	if oldNames, newNames := o.WorkerSetNames(), n.WorkerSetNames(); !slices.Equal(oldNames, newNames) {
		had := "none"
		if len(oldNames) > 0 {
			had = strings.Join(oldNames, ", ")
		}
		return append(errs, field.Forbidden(spec.Child("workerSets"),
			fmt.Sprintf("worker sets cannot be added, removed or renamed once the job exists; change their replicas instead (it has %s)", had)))
	}
	for _, name := range n.WorkerSetNames() {
		p := spec.Child("workerSets").Key(name)
		oldSet, newSet := o.WorkerSets[name], n.WorkerSets[name]
		errs = append(errs, validateTemplateUpdate(p.Child("template"), &oldSet.Template, &newSet.Template, suspended)...)
	}
	return errs
}

// slotsOf is an MPIConfig's explicit slots, if any.
func slotsOf(c *troupev1.MPIConfig) *int32 {
	if c == nil {
		return nil
	}
	return c.Slots
}
