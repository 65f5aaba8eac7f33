package mpi

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Implementation names an MPI implementation (spec.mpiImplementation on MPI kinds).
type Implementation string

const (
	OpenMPI  Implementation = "OpenMPI"  // Open MPI 4 (ORTE)
	OpenMPI5 Implementation = "OpenMPI5" // Open MPI 5 on PRRTE/PMIx
	IntelMPI Implementation = "IntelMPI" // Intel MPI (Hydra)
	MPICH    Implementation = "MPICH"    // MPICH (Hydra)
)

// Dialect is what one MPI implementation needs from the operator: how its hostfile is written,
// which environment points its launcher at the hostfile and at the agent that starts remote
// processes (an rsh-compatible command: ssh, or troupe-agent for kubectl exec), and what its
// launcher is called. Each dialect is a table in a file of its own.
type Dialect struct {
	Implementation Implementation
	// Launcher is the command that starts a job (mpirun, prterun, mpiexec).
	Launcher string
	// HostLine formats one host of the hostfile with its slots.
	HostLine func(host string, slots int32) string
	// Env is the environment that makes the launcher use hostfile and agent without flags.
	Env func(hostfile, agent string) []corev1.EnvVar
	// HostnameBased launchers (Hydra) know their own host only by its hostname, not by
	// resolving names: the launcher's own hostfile line must be its bare hostname, and the
	// remote proxies connect back to that bare name, so it must resolve in the workers too.
	HostnameBased bool
}

var dialects = map[Implementation]Dialect{
	OpenMPI:  openMPI4,
	OpenMPI5: openMPI5,
	IntelMPI: intelMPI,
	MPICH:    mpich,
}

// DialectFor returns the dialect of an implementation; "" is Open MPI 4.
func DialectFor(impl Implementation) (Dialect, error) {
	if impl == "" {
		impl = OpenMPI
	}
	d, ok := dialects[impl]
	if !ok {
		return Dialect{}, fmt.Errorf("unknown MPI implementation %q: use one of %s", impl, strings.Join(Implementations(), ", "))
	}
	return d, nil
}

// IsOpenMPI reports whether the implementation is Open MPI ("" is): it alone reads MCA
// parameters and takes --prefix.
func (impl Implementation) IsOpenMPI() bool {
	return impl == "" || impl == OpenMPI || impl == OpenMPI5
}

// Implementations lists the supported implementations, for messages and validation.
func Implementations() []string {
	return []string{string(OpenMPI), string(OpenMPI5), string(IntelMPI), string(MPICH)}
}

func env(kv ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// ParseHostfile reads a hostfile of any dialect: "host slots=N" (Open MPI) or "host:N"
// (Hydra), one host per line; blank lines and # comments are skipped, and a host without a
// count has one slot.
func ParseHostfile(text string) ([]Host, error) {
	var hosts []Host
	for i, line := range strings.Split(text, "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h := Host{Name: fields[0], Slots: 1}
		count := ""
		if name, n, ok := strings.Cut(fields[0], ":"); ok {
			h.Name, count = name, n
		}
		for _, f := range fields[1:] {
			if n, ok := strings.CutPrefix(f, "slots="); ok {
				count = n
			}
		}
		if count != "" {
			n, err := strconv.ParseInt(count, 10, 32)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("hostfile line %d: bad slot count %q", i+1, count)
			}
			h.Slots = int32(n)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}
