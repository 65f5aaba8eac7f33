package webhooks

import (
	"fmt"
	"regexp"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-pytorchjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=pytorchjobs,verbs=create;update,versions=v1alpha1,name=mpytorchjob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-pytorchjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=pytorchjobs,verbs=create;update,versions=v1alpha1,name=vpytorchjob.troupe.dev,admissionReviewVersions=v1

// PyTorchJob defaults and validates PyTorchJobs.
type PyTorchJob = Webhook[*troupev1.PyTorchJob, pyTorchJobRules]

// pyTorchJobRules are PyTorchJob's own admission rules.
type pyTorchJobRules struct{}

// Validate is ValidatePyTorchJob, which the adapter runs too.
func (pyTorchJobRules) Validate(job *troupev1.PyTorchJob) field.ErrorList {
	return ValidatePyTorchJob(job)
}

// Warnings tell what troupe changes or ignores of what the user wrote.
func (pyTorchJobRules) Warnings(job *troupev1.PyTorchJob) admission.Warnings {
	return pytorchWarnings(&job.Spec)
}

// pytorchReplicas are a PyTorchJob's replica types, in the order they are checked, and
// pytorchRole how messages name one of their pods.
var (
	pytorchReplicas = []string{"Master", "Worker"}
	pytorchRole     = map[string]string{"Master": "the master", "Worker": "a worker"}
)

func pytorchReplica(r *troupev1.PyTorchReplicaSpecs, name string) *troupev1.ReplicaSpec {
	if name == "Master" {
		return r.Master
	}
	return r.Worker
}

// nprocPerNode is what torchrun's --nproc-per-node takes (the CRD's rule too).
var nprocPerNode = regexp.MustCompile(`^(auto|cpu|gpu|[1-9][0-9]{0,3})$`)

// ValidatePyTorchJob returns every problem of a PyTorchJob's spec.
func ValidatePyTorchJob(job *troupev1.PyTorchJob) field.ErrorList {
	s := &job.Spec
	spec := field.NewPath("spec")
	specs := spec.Child("pytorchReplicaSpecs")
	errs := validateJobName(job.Name, job.DerivedNames())
	r := &s.PyTorchReplicaSpecs
	if r.Master == nil && r.Worker == nil {
		errs = append(errs, field.Required(specs, "give the Master, the Worker or both"))
	}
	pods := int64(0)
	var templates []podTemplateAt
	for _, name := range pytorchReplicas {
		rs := pytorchReplica(r, name)
		if rs == nil {
			continue
		}
		p := specs.Child(name)
		replicas := ptr.Deref(rs.Replicas, 1)
		pods += int64(replicas)
		switch {
		case name == "Master" && replicas != 1:
			errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "the master is one pod: replicas must be 1"))
		case name == "Worker":
			errs = append(errs, validateReplicas(p.Child("replicas"), replicas)...)
		}
		if rs.RestartPolicy == troupev1.ReplicaRestartAlways {
			errs = append(errs, field.Invalid(p.Child("restartPolicy"), rs.RestartPolicy, fmt.Sprintf(
				"%s runs to completion as a batch Job, whose pod cannot restart Always: use OnFailure, Never or ExitCode", pytorchRole[name])))
		}
		// The replica's restartPolicy is the pods' (the template's own gives way; a warning says).
		tmpl := rs.Template.DeepCopy()
		tmpl.Spec.RestartPolicy = rs.RestartPolicy.PodRestartPolicy(corev1.RestartPolicyOnFailure)
		if tmpl.Spec.RestartPolicy == corev1.RestartPolicyAlways {
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure // refused above already
		}
		errs = append(errs, validateTemplate(p.Child("template"), tmpl, launcherPod, troupev1.PyTorchMainContainer)...)
		templates = append(templates, podTemplateAt{path: p.Child("template"), tmpl: &rs.Template})
		if name == "Worker" {
			// The workers run to completion: one batch Job per worker, each with the template.
			errs = append(errs, validateCopiedTemplate(p.Child("template"), &rs.Template, replicas)...)
		}
	}
	if e := s.ElasticPolicy; e != nil {
		errs = append(errs, validateElasticPolicy(spec, s)...)
	}
	if n := s.NprocPerNode; n != nil && !nprocPerNode.MatchString(*n) {
		errs = append(errs, field.Invalid(spec.Child("nprocPerNode"), *n, "must be auto, cpu, gpu or a number of processes from 1 to 9999"))
	}
	errs = append(errs, validateCredentialRefs(spec, nil, nil, templates)...)
	errs = append(errs, validateRunPolicy(spec.Child("runPolicy"), &s.RunPolicy, pytorchReplicaNames(s))...)
	errs = append(errs, validateSchedulingPolicy(spec.Child("schedulingPolicy"), &s.SchedulingPolicy, pods, troupev1.PyTorchPodSetMaster)...)
	return append(errs, validateSchedulingPolicyClash(spec, s.RunPolicy.SchedulingPolicy, &s.SchedulingPolicy)...)
}

// validateElasticPolicy checks torch elastic's settings against the workers: they are required,
// their count lies within the bounds, nProcPerNode is given once, and an autoscaler's metrics
// give their sources.
func validateElasticPolicy(spec *field.Path, s *troupev1.PyTorchJobSpec) field.ErrorList {
	e, p := s.ElasticPolicy, spec.Child("elasticPolicy")
	var errs field.ErrorList
	w := s.PyTorchReplicaSpecs.Worker
	if w == nil {
		errs = append(errs, field.Required(spec.Child("pytorchReplicaSpecs", "Worker"), "must be configured if elastic policy is used"))
	}
	lo, hi := ptr.Deref(e.MinReplicas, 1), ptr.Deref(e.MaxReplicas, troupev1.MaxWorkerReplicas)
	switch {
	case lo < 1:
		errs = append(errs, field.Invalid(p.Child("minReplicas"), lo, "must be 1 or more"))
	case hi > troupev1.MaxWorkerReplicas:
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), hi, fmt.Sprintf("must be no more than %d", troupev1.MaxWorkerReplicas)))
	case lo > hi:
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), hi, "must not be less than minReplicas"))
	case w != nil && w.Replicas != nil && (*w.Replicas < lo || *w.Replicas > hi):
		errs = append(errs, field.Invalid(spec.Child("pytorchReplicaSpecs", "Worker", "replicas"), *w.Replicas,
			"must lie within elasticPolicy.minReplicas and elasticPolicy.maxReplicas"))
	}
	if e.NProcPerNode != nil && s.NprocPerNode != nil {
		errs = append(errs, field.Forbidden(p.Child("nProcPerNode"), "must not be used with spec.nprocPerNode"))
	}
	errs = append(errs, validateElasticFailurePolicy(spec.Child("runPolicy", "failurePolicy"), s.RunPolicy.FailurePolicy, "torch elastic")...)
	for i, m := range e.Metrics {
		if !metricSourceGiven(m) {
			errs = append(errs, field.Required(p.Child("metrics").Index(i), fmt.Sprintf("type %s needs its source (resource, pods, object, external or containerResource, as the type says)", m.Type)))
		}
	}
	return errs
}

// metricSourceGiven says an autoscaler metric gives the source its type names, which the API
// server's validation of the HorizontalPodAutoscaler requires.
func metricSourceGiven(m autoscalingv2.MetricSpec) bool {
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		return m.Resource != nil
	case autoscalingv2.PodsMetricSourceType:
		return m.Pods != nil
	case autoscalingv2.ObjectMetricSourceType:
		return m.Object != nil
	case autoscalingv2.ExternalMetricSourceType:
		return m.External != nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		return m.ContainerResource != nil
	}
	return false
}

// pytorchReplicaNames are a PyTorchJob's replicas as failure policy rules name them.
func pytorchReplicaNames(s *troupev1.PyTorchJobSpec) jobReplicas {
	var r jobReplicas
	if s.PyTorchReplicaSpecs.Master != nil {
		r.master = troupev1.PyTorchPodSetMaster
	}
	if s.PyTorchReplicaSpecs.Worker != nil {
		r.workers = []string{troupev1.PyTorchWorkerSetName}
	}
	return r
}

// pytorchWarnings tell what troupe changes of what the user wrote: a template's restartPolicy
// gives way to its replica's, and elasticPolicy.nProcPerNode is kubeflow's deprecated spelling.
func pytorchWarnings(s *troupev1.PyTorchJobSpec) admission.Warnings {
	var out admission.Warnings
	for _, name := range pytorchReplicas {
		if rs := pytorchReplica(&s.PyTorchReplicaSpecs, name); rs != nil {
			out = append(out, replicaRestartWarnings(field.NewPath("spec", "pytorchReplicaSpecs", name), rs,
				rs.RestartPolicy.PodRestartPolicy(corev1.RestartPolicyOnFailure))...)
		}
	}
	if e := s.ElasticPolicy; e != nil && e.NProcPerNode != nil {
		out = append(out, "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
	}
	return out
}

// ValidateUpdate refuses changes to what is fixed once the job exists: the templates but while
// suspended, the replica types and their restart policies, elasticPolicy, nprocPerNode, the
// gang provider, the failure policy. The workers' count may change (kubectl scale).
func (pyTorchJobRules) ValidateUpdate(old, job *troupev1.PyTorchJob) field.ErrorList {
	spec := field.NewPath("spec")
	suspended := wasSuspended(old.Spec.RunPolicy)
	var errs field.ErrorList
	for _, name := range pytorchReplicas {
		o, n := pytorchReplica(&old.Spec.PyTorchReplicaSpecs, name), pytorchReplica(&job.Spec.PyTorchReplicaSpecs, name)
		p := spec.Child("pytorchReplicaSpecs", name)
		switch {
		case (o == nil) != (n == nil):
			errs = append(errs, field.Forbidden(p, "cannot be added or removed once the job exists"))
		case o != nil:
			errs = append(errs, validateTemplateUpdate(p.Child("template"), &o.Template, &n.Template, suspended)...)
			errs = append(errs, immutable(p.Child("restartPolicy"), o.RestartPolicy, n.RestartPolicy)...)
		}
	}
	// Every worker was started with the rendezvous and its bounds (PET_NNODES): they stay.
	errs = append(errs, unchanged(spec.Child("elasticPolicy"), old.Spec.ElasticPolicy, job.Spec.ElasticPolicy)...)
	errs = append(errs, unchanged(spec.Child("nprocPerNode"), old.Spec.NprocPerNode, job.Spec.NprocPerNode)...)
	errs = append(errs, immutable(spec.Child("schedulingPolicy", "gang"), ptr.Deref(old.Spec.SchedulingPolicy.Gang, ""), ptr.Deref(job.Spec.SchedulingPolicy.Gang, ""))...)
	return append(errs, fixedRunPolicyUpdate(spec, &old.Spec.RunPolicy, &job.Spec.RunPolicy)...)
}
