package mpi

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestDialects(t *testing.T) {
	hosts := []Host{{"a.j.ns.svc", 1}, {"b.j.ns.svc", 4}}
	tests := []struct {
		impl         Implementation
		wantLauncher string
		wantHostfile string
		wantEnv      []corev1.EnvVar
	}{
		{
			impl: OpenMPI, wantLauncher: "mpirun",
			wantHostfile: "a.j.ns.svc slots=1\nb.j.ns.svc slots=4\n",
			wantEnv: env("OMPI_MCA_orte_default_hostfile", "/h", "OMPI_MCA_plm_rsh_agent", "/agent",
				"OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		},
		{
			impl: OpenMPI5, wantLauncher: "prterun",
			wantHostfile: "a.j.ns.svc slots=1\nb.j.ns.svc slots=4\n",
			wantEnv: env("PRTE_MCA_prte_default_hostfile", "/h", "PRTE_MCA_plm_ssh_agent", "/agent",
				"PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
		},
		{
			impl: MPICH, wantLauncher: "mpiexec",
			wantHostfile: "a.j.ns.svc:1\nb.j.ns.svc:4\n",
			wantEnv:      env("HYDRA_HOST_FILE", "/h", "HYDRA_LAUNCHER", "ssh", "HYDRA_LAUNCHER_EXEC", "/agent"),
		},
		{
			impl: IntelMPI, wantLauncher: "mpiexec.hydra",
			wantHostfile: "a.j.ns.svc:1\nb.j.ns.svc:4\n",
			wantEnv: env("I_MPI_HYDRA_HOST_FILE", "/h", "I_MPI_HYDRA_BOOTSTRAP", "ssh",
				"I_MPI_HYDRA_BOOTSTRAP_EXEC", "/agent"),
		},
	}
	for _, tc := range tests {
		t.Run(string(tc.impl), func(t *testing.T) {
			d, err := DialectFor(tc.impl)
			if err != nil {
				t.Fatal(err)
			}
			if d.Launcher != tc.wantLauncher {
				t.Errorf("launcher = %q, want %q", d.Launcher, tc.wantLauncher)
			}
			if diff := cmp.Diff(tc.wantHostfile, d.Hostfile(hosts)); diff != "" {
				t.Errorf("hostfile (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnv, d.Env("/h", "/agent")); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDialectFor(t *testing.T) {
	if d, err := DialectFor(""); err != nil || d.Implementation != OpenMPI {
		t.Errorf(`DialectFor("") = %v, %v; want Open MPI 4`, d.Implementation, err)
	}
	_, err := DialectFor("LAM")
	want := `unknown MPI implementation "LAM": use one of OpenMPI, OpenMPI5, IntelMPI, MPICH`
	if err == nil || err.Error() != want {
		t.Errorf("DialectFor(LAM) error = %v, want %q", err, want)
	}
}

// Every dialect's hostfile reads back as the hosts it was written from.
func TestParseHostfileRoundTrip(t *testing.T) {
	hosts := []Host{{Name: "a.j.ns.svc", Slots: 1}, {Name: "b.j.ns.svc", Slots: 4}}
	for _, impl := range Implementations() {
		d, err := DialectFor(Implementation(impl))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHostfile(d.Hostfile(hosts) + "\n# comment\n")
		if err != nil {
			t.Fatalf("%s: %v", impl, err)
		}
		if !reflect.DeepEqual(got, hosts) {
			t.Errorf("%s: parsed %v, want %v", impl, got, hosts)
		}
	}
	if got, err := ParseHostfile("solo\n"); err != nil || !reflect.DeepEqual(got, []Host{{Name: "solo", Slots: 1}}) {
		t.Errorf("a bare host = %v, %v; want one slot", got, err)
	}
	if _, err := ParseHostfile("a slots=zero\n"); err == nil {
		t.Errorf("a bad slot count was accepted")
	}
}
