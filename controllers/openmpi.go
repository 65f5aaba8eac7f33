package controllers

import (
	"fmt"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// describeUserInputs adds what every kind shares beyond its master and workers (kube-openmpi's
// features): the git repositories to clone into the pods, the Secrets of the user's the pods
// need (a git deploy key, an SSH identity), how a user scales a worker set (told to whoever
// scales its StatefulSet directly; scaleHint gives it per worker set), whether the operator
// lets claims name their volume, and whether containers can restart in place by rule.
func describeUserInputs(s *engine.Spec, codes []troupev1.AppCode, o Options, scaleHint func(ws *engine.WorkerSet) string) {
	s.AllowClaimVolumeSources = o.AllowClaimVolumeSources
	s.ContainerRestartRules = o.ContainerRestartRules
	if len(codes) > 0 {
		s.CodeSync = engine.CodeSync{Image: o.AgentImage, Repos: codes}
	}
	for i, c := range codes {
		if c.GitSecretName != "" {
			keys := []string{troupev1.GitSecretSSHKey}
			if o.RequireGitKnownHosts {
				keys = append(keys, troupev1.GitSecretKnownHosts)
			}
			s.RequiredSecrets = append(s.RequiredSecrets, engine.SecretRequirement{
				Field: fmt.Sprintf("spec.appCodesToSync[%d].gitSecretName", i),
				Name:  c.GitSecretName,
				Keys:  keys,
			})
		}
	}
	if b, ok := s.Backend.(mpi.Backend); ok {
		if t, ok := b.Transport.(mpi.SSH); ok && t.SecretName != "" {
			s.RequiredSecrets = append(s.RequiredSecrets, engine.SecretRequirement{
				Field: "spec.ssh.secretName",
				Name:  t.SecretName,
				Keys:  []string{troupev1.SSHSecretPrivateKey, troupev1.SSHSecretAuthorizedKeys},
			})
		}
	}
	for i := range s.WorkerSets {
		s.WorkerSets[i].ScaleHint = scaleHint(&s.WorkerSets[i])
	}
}

// scaleSubresourceHint is the advice for kinds with the scale subresource (MPIJob, HorovodJob).
func scaleSubresourceHint(resource, name string) func(*engine.WorkerSet) string {
	return func(*engine.WorkerSet) string {
		return fmt.Sprintf("kubectl scale %s/%s --replicas=%s", resource, name, engine.ScaleHintReplicas)
	}
}

// numWorkersHint is the advice for an MPIJob of the FFFFFaraway form: the scale subresource
// writes spec.worker.replicas, which that form does not have, so its count is numWorkers.
func numWorkersHint(name string) func(*engine.WorkerSet) string {
	return func(*engine.WorkerSet) string {
		return fmt.Sprintf(`kubectl patch mpijob/%s --type=merge -p '{"spec":{"numWorkers":%s}}'`, name, engine.ScaleHintReplicas)
	}
}

// kubeflowWorkersHint is the advice for an MPIJob of kubeflow's form, whose worker count is
// spec.mpiReplicaSpecs.Worker.replicas.
func kubeflowWorkersHint(name string) func(*engine.WorkerSet) string {
	return func(*engine.WorkerSet) string {
		return fmt.Sprintf(`kubectl patch mpijob/%s --type=merge -p '{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":%s}}}}'`, name, engine.ScaleHintReplicas)
	}
}

// chainerScaleHint is the advice for ChainerJob, whose worker sets have no scale subresource.
func chainerScaleHint(name string) func(*engine.WorkerSet) string {
	return func(ws *engine.WorkerSet) string {
		return fmt.Sprintf("kubectl edit chainerjob/%s and set the replicas of worker set %s to %s", name, ws.Name, engine.ScaleHintReplicas)
	}
}

// resourceOf is the kubectl resource name of an MPI program kind.
func resourceOf(job engine.Object) string {
	switch job.(type) {
	case *troupev1.HorovodJob:
		return "horovodjob"
	default:
		return "mpijob"
	}
}
