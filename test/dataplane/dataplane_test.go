// Package dataplane proves that the SSH wiring the operator generates runs real MPI in the
// image troupe ships: the ConfigMap, Secret, StatefulSet and Job the operator's builders
// produce are laid out on this machine as the kubelet would lay them out, every pod is a
// container of troupe-mpi (podman, runc) in a network namespace of its own, the workers run
// the sshd command line of their template as the image's non-root user, and the master runs
// Open MPI's or MPICH's launcher with its template's command and environment: a ChainerJob's
// master, which ranks too, or the launcher the operator generates for an MPIJob, which only
// launches. An allreduce program must then place as many ranks on each host as the hostfile
// gives it slots (none elsewhere), and add up right.
//
// It needs root (network namespaces), podman with runc, and the troupe-mpi image (make
// images; make test-dataplane builds it); without them it fails rather than skips.
package dataplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// Both include starting a container, which takes podman seconds on a loaded machine (the
// launches themselves take 2-14 s there).
const (
	sshdReadyTimeout = 60 * time.Second
	launchTimeout    = 60 * time.Second
)

// implementation is one MPI implementation as troupe-mpi has it (Debian's packages).
type implementation struct {
	impl     mpi.Implementation
	launcher string
}

var implementations = []implementation{
	{impl: mpi.OpenMPI, launcher: "/usr/bin/mpirun.openmpi"},
	{impl: mpi.MPICH, launcher: "/usr/bin/mpiexec.hydra"},
}

// programDir is where every container finds the test's MPI program (testdata, mounted
// read-only), as it would find a program of its image: the same path in every pod.
const programDir = "/opt/dataplane"

// program is the command that runs the allreduce program; it picks its MPI binding itself.
var program = []string{"python3", programDir + "/allreduce.py"}

// jobRun is one job the test runs: its builder and the MPI implementation its launcher must
// be.
type jobRun struct {
	name  string
	impl  implementation
	build func(t *testing.T) *operatorJob
}

func TestMPIOverOperatorSSH(t *testing.T) {
	checkPrerequisites(t)
	u := imageUser
	c := newCluster(t, 4) // the master (launcher) and up to three workers

	// Created after newCluster, which removes a crashed run's directories of the same prefix.
	work, err := os.MkdirTemp("", prefix+"-")
	must(t, err)
	must(t, os.Chmod(work, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	testdata, err := filepath.Abs("testdata")
	must(t, err)

	var runs []jobRun
	// ChainerJob: the master runs the launcher named in its template and ranks too.
	for _, impl := range implementations {
		for _, l := range []struct{ masterSlots, workerSlots int32 }{{1, 2}, {2, 2}} {
			runs = append(runs, jobRun{
				name: fmt.Sprintf("ChainerJob/%s/%d+2x%d", impl.impl, l.masterSlots, l.workerSlots),
				impl: impl,
				build: func(t *testing.T) *operatorJob {
					return buildChainerJob(t, impl.impl, u, append([]string{impl.launcher}, program...), l.masterSlots, l.workerSlots)
				},
			})
		}
	}
	// MPIJob as in examples/mpijob.yaml: the launcher only launches, and the operator generates
	// its command, mpirun --prefix /usr --mca btl self,vader,tcp --mca btl_tcp_if_include eth0
	// --map-by slot python3 <program>. (Debian's openmpi-mca-params.conf already sets btl
	// ^openib,ofi,uct; the example's "--mca btl ^openib" would replace that and load libfabric,
	// 1.3 s slower.)
	openMPI := implementations[0]
	runs = append(runs, jobRun{
		name: "MPIJob/OpenMPI/3x2",
		impl: openMPI,
		build: func(t *testing.T) *operatorJob {
			worker := podTemplate(u, troupev1.MPIWorkerContainer, nil)
			worker.Spec.Containers[0].WorkingDir = programDir
			// The user on the container, not the pod: the generated launcher copies the
			// worker's container, and must still read the job's SSH files.
			worker.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
				RunAsUser: worker.Spec.SecurityContext.RunAsUser, RunAsGroup: worker.Spec.SecurityContext.RunAsGroup,
			}
			worker.Spec.SecurityContext = nil
			return buildMPIJob(t, troupev1.MPIProgramSpec{
				MPIImplementation: troupev1.MPIImplementation(openMPI.impl),
				MPIHome:           "/usr",
				MCA:               map[string]string{"btl": "self,vader,tcp", "btl_tcp_if_include": "eth0"},
				Worker: troupev1.MPIWorker{
					Replicas:     ptr.To[int32](3),
					Slots:        ptr.To[int32](2),
					ExtraMPIArgs: []string{"--map-by", "slot"},
					Cmd:          program,
					Template:     worker,
				},
			})
		},
	})

	// The same MPIJob with a key pair of the user's (ssh.secretName): the workers accept only
	// the user's authorized_keys, so the run proves the launcher uses the user's key, next to
	// the job's generated host key and known_hosts.
	runs = append(runs, jobRun{
		name: "MPIJob/OpenMPI/2x1/user-ssh-key",
		impl: openMPI,
		build: func(t *testing.T) *operatorJob {
			worker := podTemplate(u, troupev1.MPIWorkerContainer, nil)
			worker.Spec.Containers[0].WorkingDir = programDir
			return buildMPIJob(t, troupev1.MPIProgramSpec{
				MPIImplementation: troupev1.MPIImplementation(openMPI.impl),
				MPIHome:           "/usr",
				MCA:               map[string]string{"btl": "self,vader,tcp", "btl_tcp_if_include": "eth0"},
				MPILaunch:         troupev1.MPILaunch{SSH: &troupev1.SSHConfig{SecretName: "user-key"}},
				Worker: troupev1.MPIWorker{
					Replicas: ptr.To[int32](2),
					Slots:    ptr.To[int32](1),
					Cmd:      program,
					Template: worker,
				},
			})
		},
	})

	// An MPIJob with MPICH as a user of troupe-mpi writes it (test/realnode does the same):
	// /opt/mpich/bin first on the PATH, so the generated "mpiexec" is Hydra's; three workers,
	// one rank each, that also exchange 400 kB. Without troupe-mpi's mpich-pmi-progress its
	// ranks hang in MPI_Finalize (docs/mpi.md) and the launch times out.
	mpich := implementations[1]
	runs = append(runs, jobRun{
		name: "MPIJob/MPICH/3x1/400kB",
		impl: mpich,
		build: func(t *testing.T) *operatorJob {
			worker := podTemplate(u, troupev1.MPIWorkerContainer, nil)
			worker.Spec.Containers[0].WorkingDir = programDir
			worker.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PATH", Value: "/opt/mpich/bin:/usr/local/bin:/usr/bin:/bin"}}
			return buildMPIJob(t, troupev1.MPIProgramSpec{
				MPIImplementation: troupev1.MPIImplementation(mpich.impl),
				Worker: troupev1.MPIWorker{
					Replicas: ptr.To[int32](3),
					Slots:    ptr.To[int32](1),
					Cmd:      append(append([]string{}, program...), "--bcast-bytes", "400000"),
					Template: worker,
				},
			})
		},
	})

	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			runJob(t, c, u, r.build(t), r.impl, work, testdata)
		})
	}
}

// runJob runs the job's pods on the cluster's hosts (the master on the first, each worker on
// one of the others), the launcher's command in the master's pod, and checks the launcher's
// output against the hostfile: the workers, preceded by the master when it is a host too.
func runJob(t *testing.T, c *cluster, u testUser, j *operatorJob, impl implementation, work, testdata string) {
	master, workers := j.pods(t)
	pods := append([]pod{master}, workers...)
	if len(pods) > len(c.hosts) {
		t.Fatalf("%d pods for %d hosts", len(pods), len(c.hosts))
	}
	ranked := workers
	if j.spec.Master.IsHost {
		ranked = pods
	}
	hostfile := j.hostfile(t)
	if len(hostfile) != len(ranked) {
		t.Fatalf("the hostfile lists %d hosts, the job has %d pods that rank (master is a host: %v):\n%s",
			len(hostfile), len(ranked), j.spec.Master.IsHost, j.configMap.Data[mpi.HostfileKey])
	}
	// Host i of the hostfile must name pod i (a master that ranks first: it is rank 0) by its
	// DNS name; the master's own line may also use its hostname, since only the master reads it.
	for i, e := range hostfile {
		if e.name != ranked[i].dnsName && (!j.spec.Master.IsHost || i > 0 || e.name != ranked[i].hostname) {
			t.Fatalf("hostfile line %d names %q, want pod %s's DNS name %q", i+1, e.name, ranked[i].hostname, ranked[i].dnsName)
		}
	}
	c.setDNS(t, pods)

	volumes, err := os.MkdirTemp(work, "volumes-")
	must(t, err)
	for i, p := range workers {
		h := c.hosts[1+i]
		probe := p.container.ReadinessProbe
		if probe == nil || probe.TCPSocket == nil {
			t.Fatalf("worker %s has no TCP readiness probe", p.hostname)
		}
		proc := h.start(t, podContainer(t, j, p, u, volumes, testdata))
		h.waitListening(t, proc, int32(probe.TCPSocket.Port.IntValue()), sshdReadyTimeout)
		checkProcessUser(t, proc, u.uid)
		checkSSHDHardening(t, proc, u.uid != 0)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s (%s) output:\n%s", p.hostname, strings.Join(proc.argv, " "), proc.out)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	mc := podContainer(t, j, master, u, volumes, testdata)
	checkLauncherIs(t, mc, impl)
	start := time.Now()
	out, err := c.hosts[0].command(ctx, mc).CombinedOutput()
	removeContainer(t, mc.name) // gone with --rm, unless the launch timed out
	t.Logf("%s on %s (%.1fs):\n%s", strings.Join(mc.argv, " "), master.hostname, time.Since(start).Seconds(), out)
	// The master runs no sshd (the operator starts it on workers only), so a launcher that
	// treats the master's own hostfile line as a remote host fails; say so plainly.
	if j.spec.Master.IsHost && strings.Contains(string(out), "connect to host "+hostfile[0].name+" ") {
		t.Errorf("the launcher ran its agent to start processes on its own host %s (the master runs no sshd): it does not recognise the hostfile's line %q as the local host",
			master.hostname, hostfile[0].name)
	}
	if err != nil {
		t.Fatalf("launcher failed: %v (context: %v)", err, ctx.Err())
	}
	checkRanks(t, hostfile, u.uid, string(out))
	if !j.spec.Master.IsHost {
		for _, m := range rankLine.FindAllStringSubmatch(string(out), -1) {
			if m[3] == master.hostname {
				t.Errorf("rank %s runs on the launcher %s, which only launches", m[1], master.hostname)
			}
		}
	}
}

// checkLauncherIs checks that the launcher container's command starts impl's launcher when
// looked up in the container's PATH, in the image: a generated command names the dialect's
// launcher ("mpirun"), which Debian's alternatives may point at another MPI.
func checkLauncherIs(t *testing.T, c container, impl implementation) {
	t.Helper()
	args := append([]string{}, podmanRun...)
	args = append(args, "--rm", "--label", containerLabel, "--network", "none", "--user", fmt.Sprintf("%d:%d", c.uid, c.gid))
	for _, e := range c.env {
		args = append(args, "--env", e)
	}
	// Both resolved to the file they end at: Debian's alternatives are chains of links.
	args = append(args, "--entrypoint", "/bin/sh", mpiImage, "-c", `readlink -f "$(command -v "$1")" "$2"`, "sh", c.argv[0], impl.launcher)
	out, err := exec.Command("podman", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("resolve %s and %s in %s: %v\n%s", c.argv[0], impl.launcher, mpiImage, err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != got[1] {
		t.Fatalf("the launcher's command %q is %q in %s, not %s's %s: point the container's PATH at it",
			c.argv[0], got, mpiImage, impl.impl, impl.launcher)
	}
}

// podContainer is the container the test runs in pod p (see pod.container): its command line,
// working directory, environment, user and volumes exactly as the operator's pod template
// gives them, plus the test's program directory.
func podContainer(t *testing.T, j *operatorJob, p pod, u testUser, volumes, testdata string) container {
	t.Helper()
	argv := append(append([]string{}, p.container.Command...), p.container.Args...)
	if len(argv) == 0 {
		t.Fatalf("pod %s: container %s has no command", p.hostname, p.container.Name)
	}
	uid, gid, groups := credentials(t, p)
	if uid != u.uid {
		t.Fatalf("pod %s runs as uid %d, want the test user's %d", p.hostname, uid, u.uid)
	}
	return container{
		name:     prefix + "-" + p.hostname,
		hostname: p.hostname,
		mounts:   append(j.materialise(t, volumes, p), bindMount{src: testdata, dst: programDir, readOnly: true}),
		uid:      uid, gid: gid, groups: groups,
		env:  containerEnv(t, p),
		dir:  p.container.WorkingDir,
		argv: argv,
	}
}

var rankLine = regexp.MustCompile(`(?m)^rank (\d+) of (\d+) on (\S+) uid (\d+) sum (-?\d+)$`)

// checkRanks checks the program's output: one line per rank 0..N-1 where N is the hostfile's
// total of slots, as many ranks on each host as its slots, every rank run by the pods' user,
// and the allreduce's N*(N+1)/2 on every rank.
func checkRanks(t *testing.T, hostfile []hostfileEntry, uid int64, out string) {
	t.Helper()
	wantPerHost, total := map[string]int{}, 0
	for _, e := range hostfile {
		short, _, _ := strings.Cut(e.name, ".") // the pod's hostname, which MPI reports
		wantPerHost[short] = e.slots
		total += e.slots
	}
	gotPerHost, seen := map[string]int{}, map[int]bool{}
	wantSum := total * (total + 1) / 2
	for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
		rank, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		sum, _ := strconv.Atoi(m[5])
		if m[4] != strconv.FormatInt(uid, 10) {
			t.Errorf("rank %d runs as uid %s, want the pods' runAsUser %d", rank, m[4], uid)
		}
		if size != total {
			t.Errorf("rank %d reports %d ranks, want %d (the hostfile's slots)", rank, size, total)
		}
		if sum != wantSum {
			t.Errorf("rank %d: allreduce gave %d, want %d", rank, sum, wantSum)
		}
		if seen[rank] {
			t.Errorf("rank %d reported twice", rank)
		}
		seen[rank] = true
		gotPerHost[m[3]]++
	}
	if len(seen) != total {
		t.Errorf("%d ranks reported, want %d", len(seen), total)
	}
	if diff := cmp.Diff(wantPerHost, gotPerHost); diff != "" {
		t.Errorf("ranks per host differ from the hostfile's slots (-hostfile +ran):\n%s", diff)
	}
}

// checkProcessUser checks that a started container's process runs as uid: sshd serves the
// job as the pods' non-root user.
func checkProcessUser(t *testing.T, p *process, uid int64) {
	t.Helper()
	pid, err := exec.Command("podman", "inspect", "--format", "{{.State.Pid}}", p.name).Output()
	if err != nil {
		t.Fatalf("podman inspect %s: %v", p.name, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", strings.TrimSpace(string(pid))))
	must(t, err)
	want := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)
	if !strings.Contains(string(status), want) {
		t.Fatalf("%s does not run as uid %d only:\n%s", strings.Join(p.argv, " "), uid, status)
	}
}

// checkSSHDHardening asks the worker's running sshd for the configuration it serves with
// (sshd -T on the same sshd_config): public keys only, no forwarding, no user environment and,
// for workers that run as another user than root, no root login at all.
func checkSSHDHardening(t *testing.T, p *process, nonRoot bool) {
	t.Helper()
	config := ""
	for i, a := range p.argv {
		if a == "-f" && i+1 < len(p.argv) {
			config = p.argv[i+1]
		}
	}
	if config == "" {
		t.Fatalf("the worker's sshd names no sshd_config: %v", p.argv)
	}
	out, err := exec.Command("podman", "exec", p.name, p.argv[0], "-T", "-f", config).CombinedOutput()
	if err != nil {
		t.Fatalf("sshd -T -f %s in %s: %v\n%s", config, p.name, err, out)
	}
	want := []string{"pubkeyauthentication yes", "passwordauthentication no", "kbdinteractiveauthentication no",
		"permituserenvironment no", "usepam no", "disableforwarding yes"}
	if nonRoot {
		want = append(want, "permitrootlogin no")
	}
	effective := "\n" + string(out)
	for _, w := range want {
		if !strings.Contains(effective, "\n"+w+"\n") {
			t.Errorf("the worker's sshd serves without %q:\n%s", w, out)
		}
	}
}

// checkPrerequisites fails the test, rather than skipping it, when it cannot run here.
func checkPrerequisites(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the data-plane test needs root (network namespaces, containers on them); run it as root: make test-dataplane")
	}
	var missing []string
	for _, tool := range []string{"ip", "podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the data-plane test needs %s: install them with hack/container-deps.sh (make test-dataplane does)", strings.Join(missing, ", "))
	}
	if err := exec.Command("podman", "image", "exists", mpiImage).Run(); err != nil {
		t.Fatalf("the data-plane test runs the image %s, which podman does not have: build it with make images (make test-dataplane builds it)", mpiImage)
	}
}
