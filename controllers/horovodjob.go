package controllers

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// HorovodJobNameLabel names the HorovodJob on every child and pod.
const HorovodJobNameLabel = troupev1.HorovodJobNameLabel

// horovodDefaults is what horovodrun adds to mpirun, as Open MPI environment, so that a
// generated launcher and a launcher template of the user's both get it: no core binding,
// processes mapped by slot, the ob1 PML without openib, and NCCL_DEBUG, LD_LIBRARY_PATH and PATH
// forwarded to every rank. A variable the launcher container sets itself wins.
var horovodDefaults = []corev1.EnvVar{
	{Name: "NCCL_DEBUG", Value: "INFO"},
	{Name: "OMPI_MCA_hwloc_base_binding_policy", Value: "none"},
	{Name: "OMPI_MCA_rmaps_base_mapping_policy", Value: "slot"},
	{Name: "OMPI_MCA_pml", Value: "ob1"},
	{Name: "OMPI_MCA_btl", Value: "^openib"},
	{Name: "OMPI_MCA_mca_base_env_list", Value: "NCCL_DEBUG;LD_LIBRARY_PATH;PATH"},
}

// HorovodJob adapts HorovodJob to the engine: the shared MPI program shape with Horovod's
// defaults, and elastic Horovod with a discovery script of the ready workers.
type HorovodJob struct {
	Options
}

var _ engine.Adapter = HorovodJob{}

// NewObject returns an empty HorovodJob.
func (HorovodJob) NewObject() engine.Object { return &troupev1.HorovodJob{} }

// NameLabel is the HorovodJob name label.
func (HorovodJob) NameLabel() string { return HorovodJobNameLabel }

// Describe turns a HorovodJob into the engine's Spec.
func (a HorovodJob) Describe(obj engine.Object, s *engine.Spec) error {
	job, err := admitted(obj, a.Options, webhooks.ValidateHorovodJob)
	if err != nil {
		return err
	}
	p, elastic := &job.Spec.MPIProgramSpec, job.Spec.Elastic
	launch := func(d mpi.Dialect, b mpi.Backend, ws *engine.WorkerSet) []string {
		if elastic != nil {
			return horovodrunElastic(p, elastic, b, ws)
		}
		return mpirunCommand(p, d)
	}
	if err := mpiProgram(job, p, troupev1.HorovodMainContainer, mpiForm{}, a.Options, s, launch); err != nil {
		return err
	}
	for i := range s.Master.Template.Spec.Containers {
		c := &s.Master.Template.Spec.Containers[i]
		c.Env = withDefaults(c.Env, horovodDefaults)
	}
	if elastic != nil {
		s.ElasticWorkers = true
		b := s.Backend.(mpi.Backend)
		b.DiscoverHosts = true
		b.WaitMinHosts = elastic.MinReplicas
		s.Backend = b
	}
	return nil
}

// horovodrunElastic is the generated launcher of an elastic job: horovodrun between the
// bounds' process counts, discovering hosts with the script the operator keeps up to date, and
// reaching them with the job's SSH key and port.
func horovodrunElastic(p *troupev1.MPIProgramSpec, e *troupev1.HorovodElastic, b mpi.Backend, ws *engine.WorkerSet) []string {
	slots := ws.Slots
	np := ws.Replicas * slots
	cmd := []string{"horovodrun",
		"-np", strconv.Itoa(int(np)),
		"--min-np", strconv.Itoa(int(e.MinReplicas * slots)),
		"--max-np", strconv.Itoa(int(e.MaxReplicas * slots)),
		"--host-discovery-script", mpi.ConfigMountPath + "/" + mpi.DiscoverHostsKey,
	}
	if ssh, ok := b.Transport.(mpi.SSH); ok {
		cmd = append(cmd, "--ssh-port", strconv.Itoa(int(ssh.SSHPort())),
			"--ssh-identity-file", ssh.IdentityFile())
	}
	cmd = append(cmd, p.Worker.ExtraMPIArgs...)
	return append(cmd, p.Worker.Cmd...)
}

// withDefaults appends each default the container does not set itself.
func withDefaults(env, defaults []corev1.EnvVar) []corev1.EnvVar {
	set := map[string]bool{}
	for _, e := range env {
		set[e.Name] = true
	}
	for _, d := range defaults {
		if !set[d.Name] {
			env = append(env, d)
		}
	}
	return env
}
