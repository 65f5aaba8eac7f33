package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/torch"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// PyTorchJobNameLabel names the PyTorchJob on every child and pod.
const PyTorchJobNameLabel = troupev1.PyTorchJobNameLabel

// PyTorchJob adapts PyTorchJob to the engine: the Master is the engine's master (rank 0), the
// Workers a worker set that runs to completion (a batch Job per pod); a job of Workers alone has
// no master and ends with them. The torch backend gives every pod its environment.
type PyTorchJob struct {
	Options
}

var _ engine.Adapter = PyTorchJob{}

// NewObject returns an empty PyTorchJob.
func (PyTorchJob) NewObject() engine.Object { return &troupev1.PyTorchJob{} }

// NameLabel is the PyTorchJob name label.
func (PyTorchJob) NameLabel() string { return PyTorchJobNameLabel }

// Describe turns a PyTorchJob into the engine's Spec.
func (a PyTorchJob) Describe(obj engine.Object, s *engine.Spec) error {
	job, err := admitted(obj, a.Options, webhooks.ValidatePyTorchJob)
	if err != nil {
		return err
	}
	spec := &job.Spec
	r := spec.PyTorchReplicaSpecs
	sp := spec.RunPolicy.SchedulingPolicy.FoldInto(spec.SchedulingPolicy)
	if err := describePolicies(s, spec.RunPolicy, sp, troupev1.PyTorchMainContainer, a.Options); err != nil {
		return err
	}
	s.ElasticWorkers = spec.ElasticPolicy != nil

	var rankZero *corev1.PodTemplateSpec
	if m := r.Master; m != nil {
		tmpl := pytorchTemplate(m)
		s.Master = masterOf(troupev1.PyTorchMasterJob.For(job.Name), tmpl, spec.RunPolicy.BackoffLimit, spec.RunPolicy.ActiveDeadlineSeconds)
		s.Master.TemplateField = "spec.pytorchReplicaSpecs.Master.template"
		if m.RestartPolicy == troupev1.ReplicaRestartExitCode {
			s.Master.PodFailurePolicy = engine.ExitCodeFailurePolicy(nil, &tmpl, troupev1.PyTorchMainContainer)
		}
		rankZero = &s.Master.Template
	}
	if w := r.Worker; w != nil {
		tmpl := pytorchTemplate(w)
		ws := engine.WorkerSet{
			Name:             troupev1.PyTorchWorkerSetName,
			ChildName:        job.Name + "-" + troupev1.PyTorchWorkerSetName, // its Jobs: <ChildName>-<i>
			RunsToCompletion: true,
			TemplateField:    "spec.pytorchReplicaSpecs.Worker.template",
			BackoffLimit:     *spec.RunPolicy.BackoffLimit,
			Replicas:         *w.Replicas,
			Slots:            1,
			Template:         tmpl,
		}
		if w.RestartPolicy == troupev1.ReplicaRestartExitCode {
			ws.PodFailurePolicy = engine.ExitCodeFailurePolicy(nil, &tmpl, troupev1.PyTorchMainContainer)
		}
		if r.Master == nil {
			ws.ActiveDeadlineSeconds = spec.RunPolicy.ActiveDeadlineSeconds // no master to bound
		}
		s.WorkerSets = []engine.WorkerSet{ws}
		if rankZero == nil {
			rankZero = &s.WorkerSets[0].Template
		}
	}
	s.Backend = torchBackend(spec, troupev1.PyTorchPort(rankZero))
	describeUserInputs(s, nil, a.Options, scaleSubresourceHint("pytorchjob", job.Name))
	return nil
}

// pytorchTemplate is a replica's pod template with its restartPolicy (ExitCode runs as Never,
// its pod failure policy deciding).
func pytorchTemplate(rs *troupev1.ReplicaSpec) corev1.PodTemplateSpec {
	tmpl := *rs.Template.DeepCopy()
	tmpl.Spec.RestartPolicy = rs.RestartPolicy.PodRestartPolicy(corev1.RestartPolicyOnFailure)
	return tmpl
}

// torchBackend is the torch backend of a defaulted PyTorchJob whose rank 0 listens on port.
func torchBackend(spec *troupev1.PyTorchJobSpec, port int32) torch.Backend {
	b := torch.Backend{Port: port, NprocPerNode: ptr.Deref(spec.NprocPerNode, "")}
	e := spec.ElasticPolicy
	if e == nil {
		return b
	}
	if e.NProcPerNode != nil { // kubeflow's deprecated spelling
		b.NprocPerNode = fmt.Sprint(*e.NProcPerNode)
	}
	conf := make([]string, 0, len(e.RDZVConf))
	for _, c := range e.RDZVConf {
		conf = append(conf, c.Key+"="+c.Value)
	}
	b.Elastic = &torch.Elastic{
		MinReplicas: ptr.Deref(e.MinReplicas, 1), MaxReplicas: ptr.Deref(e.MaxReplicas, 1),
		RDZVBackend: string(ptr.Deref(e.RDZVBackend, troupev1.RDZVBackendC10D)),
		RDZVHost:    ptr.Deref(e.RDZVHost, ""), RDZVPort: ptr.Deref(e.RDZVPort, 0),
		RDZVID: ptr.Deref(e.RDZVID, ""), RDZVConf: strings.Join(conf, ","),
		Standalone: ptr.Deref(e.Standalone, false), MaxRestarts: e.MaxRestarts, Metrics: e.Metrics,
	}
	return b
}
