package mpi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Open MPI writes "host slots=N" hostfiles.
func openMPIHostLine(host string, slots int32) string { return fmt.Sprintf("%s slots=%d", host, slots) }

// openMPI4AgentFallback follows the agent in plm_rsh_agent, a list of which Open MPI uses the
// first it finds. mpirun passes the parameter on to the orted it starts on every host, and an
// orted that finds none of the list's agents aborts at start-up (it checks though, with
// plm_rsh_no_tree_spawn, it never starts anything). troupe-agent exists only in the launcher's
// pod (KubeExec), so in the workers /bin/false is found instead, and never run. (The SSH
// transport's agent is in the job's ConfigMap, mounted in every pod.) Found on the
// real node: every KubeExec launch failed with "plm_rsh_agent ... could not be found".
const openMPI4AgentFallback = " : /bin/false"

// openMPI4 is Open MPI 4 (ORTE): MCA parameters come from OMPI_MCA_* variables.
var openMPI4 = Dialect{
	Implementation: OpenMPI,
	Launcher:       "mpirun",
	HostLine:       openMPIHostLine,
	Env: func(hostfile, agent string) []corev1.EnvVar {
		if agent == KubeExecAgent {
			agent += openMPI4AgentFallback
		}
		return env(
			"OMPI_MCA_orte_default_hostfile", hostfile,
			"OMPI_MCA_plm_rsh_agent", agent,
			// Host names are the pods' DNS names; keep them whole rather than cut at the first dot.
			"OMPI_MCA_orte_keep_fqdn_hostnames", "true",
		)
	},
}

// openMPI5 is Open MPI 5, whose runtime is PRRTE over PMIx: the launcher is prterun (mpirun
// wraps it) and the runtime's parameters are PRTE_MCA_* variables; PRRTE calls its remote
// agent parameter plm_ssh_agent.
var openMPI5 = Dialect{
	Implementation: OpenMPI5,
	Launcher:       "prterun",
	HostLine:       openMPIHostLine,
	Env: func(hostfile, agent string) []corev1.EnvVar {
		return env(
			"PRTE_MCA_prte_default_hostfile", hostfile,
			"PRTE_MCA_plm_ssh_agent", agent,
			"PRTE_MCA_prte_keep_fqdn_hostnames", "true",
		)
	},
}
