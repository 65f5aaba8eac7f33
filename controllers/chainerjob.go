// Package controllers holds one small adapter per troupe kind: it turns the kind's spec into
// the engine's framework-neutral Spec and registers the engine's reconciler for the kind.
package controllers

import (
	"fmt"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// ChainerJobNameLabel names the ChainerJob on every child and pod.
const ChainerJobNameLabel = troupev1.ChainerJobNameLabel

// ChainerJob adapts ChainerJob to the engine: the master is rank 0 of the MPI world and each
// worker set is a StatefulSet named <job>-workerset-<set>.
type ChainerJob struct {
	Options
}

var _ engine.Adapter = ChainerJob{}

// NewObject returns an empty ChainerJob.
func (ChainerJob) NewObject() engine.Object { return &troupev1.ChainerJob{} }

// NameLabel is the ChainerJob name label.
func (ChainerJob) NameLabel() string { return ChainerJobNameLabel }

// Describe turns a ChainerJob into the engine's Spec.
func (a ChainerJob) Describe(obj engine.Object, s *engine.Spec) error {
	job, err := admitted(obj, a.Options, webhooks.ValidateChainerJob)
	if err != nil {
		return err
	}
	spec := &job.Spec
	if err := describePolicies(s, spec.RunPolicy, spec.SchedulingPolicy, troupev1.ChainerMainContainer, a.Options); err != nil {
		return err
	}
	s.Master = masterOf(troupev1.ChainerMasterJob.For(job.Name), spec.Master.Template, spec.Master.BackoffLimit, spec.Master.ActiveDeadlineSeconds)
	s.Master.TemplateField = "spec.master.template"
	// Defaulting gives the master of backend none no slots (it has no hostfile); the engine
	// still bounds them, from the template as defaulting would.
	s.Master.Slots = mpi.Slots(&spec.Master.Template, troupev1.ChainerMainContainer, slotsOf(spec.Master.MPIConfig))
	s.Master.IsHost = true
	s.RunMode = runModeOf(spec.RunMode, troupev1.ReplicaMaster, spec.Transport)

	if spec.Backend == troupev1.ChainerBackendNone { // and so no worker sets (validated)
		describeUserInputs(s, spec.AppCodesToSync, a.Options, chainerScaleHint(job.Name))
		return nil
	}
	backend, err := mpiBackend(spec.MPILaunch, a.AgentImage)
	if err != nil {
		return err
	}
	backend.WaitBestEffort = s.RunMode.Debug != nil
	s.Backend = backend
	if backend.AgentImage != "" {
		s.Master.PodFailurePolicy = mpi.WaitFailurePolicy(&spec.Master.Template)
	}
	for _, name := range spec.WorkerSetNames() {
		ws := spec.WorkerSets[name]
		s.WorkerSets = append(s.WorkerSets, engine.WorkerSet{
			Name:          name,
			ChildName:     troupev1.ChainerWorkerSetStatefulSetName(job.Name, name),
			TemplateField: fmt.Sprintf("spec.workerSets[%s].template", name),
			Replicas:      *ws.Replicas,
			Slots:         *ws.MPIConfig.Slots,
			Template:      ws.Template,
		})
	}
	describeUserInputs(s, spec.AppCodesToSync, a.Options, chainerScaleHint(job.Name))
	return nil
}

func slotsOf(c *troupev1.MPIConfig) *int32 {
	if c == nil {
		return nil
	}
	return c.Slots
}
