package controllers

import (
	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// MPIJobNameLabel names the MPIJob on every child and pod.
const MPIJobNameLabel = troupev1.MPIJobNameLabel

// MPIJob adapts MPIJob to the engine: the shared MPI program shape, with a generated launcher
// that runs mpirun with the spec's MCA parameters, extraMPIArgs and cmd. A job written in the
// FFFFFaraway form (numWorkers, launcherTemplate, workerTemplate) runs as the same program, its
// launcher and workers as written, over KubeExec.
type MPIJob struct {
	Options
}

var _ engine.Adapter = MPIJob{}

// NewObject returns an empty MPIJob.
func (MPIJob) NewObject() engine.Object { return &troupev1.MPIJob{} }

// NameLabel is the MPIJob name label.
func (MPIJob) NameLabel() string { return MPIJobNameLabel }

// Describe turns an MPIJob into the engine's Spec.
func (a MPIJob) Describe(obj engine.Object, s *engine.Spec) error {
	job, err := admitted(obj, a.Options, webhooks.ValidateMPIJob)
	if err != nil {
		return err
	}
	p, mainContainer := job.Spec.ProgramWithDefaults()
	form := mpiForm{
		launcherIsHost:            job.Spec.LauncherIsWorker(),
		launcherAfterWorkersReady: job.Spec.LauncherCreationPolicy == troupev1.LauncherWaitForWorkersReady,
		kubeflow:                  job.Spec.Kubeflow(),
		templateFields:            job.Spec.IsWorkerTemplateForm(),
	}
	return mpiProgram(job, &p, mainContainer, form, a.Options, s, func(d mpi.Dialect, _ mpi.Backend, _ *engine.WorkerSet) []string {
		return mpirunCommand(&p, d)
	})
}
