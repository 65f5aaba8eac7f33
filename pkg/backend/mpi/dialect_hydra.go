package mpi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// MPICH and Intel MPI both launch with Hydra, whose hostfiles read "host:N".
func hydraHostLine(host string, slots int32) string { return fmt.Sprintf("%s:%d", host, slots) }

// mpich is MPICH's Hydra (mpiexec.hydra): HYDRA_* variables.
var mpich = Dialect{
	Implementation: MPICH,
	Launcher:       "mpiexec",
	HostLine:       hydraHostLine,
	HostnameBased:  true,
	Env: func(hostfile, agent string) []corev1.EnvVar {
		return env(
			"HYDRA_HOST_FILE", hostfile,
			"HYDRA_LAUNCHER", "ssh",
			"HYDRA_LAUNCHER_EXEC", agent,
		)
	},
}

// intelMPI is Intel MPI's Hydra: I_MPI_HYDRA_* variables.
var intelMPI = Dialect{
	Implementation: IntelMPI,
	Launcher:       "mpiexec.hydra",
	HostLine:       hydraHostLine,
	HostnameBased:  true,
	Env: func(hostfile, agent string) []corev1.EnvVar {
		return env(
			"I_MPI_HYDRA_HOST_FILE", hostfile,
			"I_MPI_HYDRA_BOOTSTRAP", "ssh",
			"I_MPI_HYDRA_BOOTSTRAP_EXEC", agent,
		)
	},
}
