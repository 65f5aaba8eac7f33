package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const (
	// testPodEnv names, in every process an exec into a worker pod starts, the pod it was
	// exec'ed into: a kwok Exec per pod sets it (kwok runs every exec on this machine).
	testPodEnv = "TROUPE_TEST_POD"
	// launcherPod is what a rank started by mpirun itself reports: it has no testPodEnv.
	launcherPod = "-"
	// outlivesTheTest keeps a simulated master Running, and so its workers, for the whole test.
	outlivesTheTest = "10m"
	openMPIRun      = "/usr/bin/mpirun.openmpi"
	openMPICC       = "/usr/bin/mpicc.openmpi"
)

// The KubeExec transport end to end with real Open MPI: mpirun, wired as the operator wires the
// master (the ConfigMap's hostfile, the master Job's environment), starts its daemons on the
// worker hosts through troupe-rsh, the API server's pods/exec with the job's own
// ServiceAccount token, and kwok, which runs each exec on this machine with the pod's name in
// the environment. Every rank reports its pod: the ranks per pod must be the pod's slots. The
// same agent holding another job's token is refused.
func TestKubeExecRunsMPI(t *testing.T) {
	t.Parallel()
	run := startKubeExecMPIJob(t)
	out := runMPI(t, run.env, run.masterHost, run.dir, run.program)
	checkRankReports(t, out, run.wantRanks)
}

// kubeExecMPIRun is what mpirun on this machine needs to run as the master of a KubeExec job
// whose workers are Ready: the master's environment (with the job's own token), the master's
// host name, a directory and the program, and the ranks each pod must report.
type kubeExecMPIRun struct {
	env        []string
	masterHost string
	dir        string
	program    string
	wantRanks  map[string]int
}

// startKubeExecMPIJob creates the KubeExec ChainerJob (master 1 slot, two workers with 2) and
// another job, waits for its workers, checks its hostfile and that troupe-rsh reaches each
// worker with the job's token and is refused with the other job's, and returns what mpirun
// needs.
func startKubeExecMPIJob(t *testing.T) kubeExecMPIRun {
	t.Helper()
	requireOpenMPI(t)
	ns := newNamespace(t)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	const name, intruder = "kexec", "intruder"
	job := testutil.MakeChainerJob(name, ns).WorkerSet("ws0", 2).Obj()
	job.Spec.Master.MPIConfig = &troupev1.MPIConfig{Slots: ptr.To[int32](1)}
	testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.MPIConfig = &troupev1.MPIConfig{Slots: ptr.To[int32](2)} })
	// A simulated master completes after 3s, and the workers are released then.
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: outlivesTheTest}
	create(t, job)
	other := testutil.MakeChainerJob(intruder, ns).WorkerSet("ws0", 1).Obj()
	other.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: outlivesTheTest}
	create(t, other)

	// Build while the cluster starts the pods.
	dir := t.TempDir()
	agent := buildRshAgent(t, dir)
	program := mpiCompile(t, dir, filepath.Join("testdata", "podranks.c"))

	waitForJob(t, ns, name, "Running with its workers ready", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobRunning && meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	})
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-mpi"}, &cm); err != nil {
		t.Fatal(err)
	}
	hosts, err := mpi.ParseHostfile(cm.Data[mpi.HostfileKey])
	if err != nil {
		t.Fatalf("hostfile of ConfigMap %s-mpi: %v", name, err)
	}
	masterHost := fmt.Sprintf("%s-master.%s.%s.svc", name, name, ns)
	if len(hosts) != 3 || hosts[0].Name != masterHost {
		t.Fatalf("hostfile %q: want the master %s first, then 2 workers", cm.Data[mpi.HostfileKey], masterHost)
	}
	podsTmp, err := os.MkdirTemp("", "trp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(podsTmp) })
	wantRanks := map[string]int{launcherPod: int(hosts[0].Slots)}
	var workerHosts []string
	for _, h := range hosts[1:] {
		pod, _, _ := strings.Cut(h.Name, ".")
		wantRanks[pod] = int(h.Slots)
		workerHosts = append(workerHosts, h.Name)
		createPodExec(t, ns, pod, podsTmp)
	}
	if want := map[string]int{launcherPod: 1, name + "-workerset-ws0-0": 2, name + "-workerset-ws0-1": 2}; !maps.Equal(wantRanks, want) {
		t.Fatalf("hostfile slots per pod = %v, want %v (the spec's mpiConfig.slots)", wantRanks, want)
	}

	// The launcher's environment is the master Job's, with the two paths of its volumes
	// (/etc/troupe/mpi holds the hostfile, /opt/troupe/bin the agent) replaced by where the
	// hostfile and the agent are on this machine, and the job's ServiceAccount token in a
	// kubeconfig of its own where a pod would have it mounted.
	hostfile := filepath.Join(dir, mpi.HostfileKey)
	if err := os.WriteFile(hostfile, []byte(cm.Data[mpi.HostfileKey]), 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent parameter is a list: troupe-agent, then /bin/false for the workers' orted.
	env := launcherEnv(t, ns, name+"-master", map[string]string{mpi.HostfilePath: hostfile, mpi.KubeExecAgent + " : /bin/false": agent + " : /bin/false"})
	ownToken := slices.Concat(env, []string{"KUBECONFIG=" + tokenKubeconfig(t, ns, name+"-exec", dir)})
	otherToken := slices.Concat(env, []string{"KUBECONFIG=" + tokenKubeconfig(t, ns, intruder+"-exec", dir)})

	// An exec runs under the cluster-wide ClusterExec, without the pod's name, until kwok has
	// seen the pod's Exec.
	for _, host := range workerHosts {
		pod, _, _ := strings.Cut(host, ".")
		eventually(t, "an exec into "+pod+" to run with its name", func(ctx context.Context) (bool, error) {
			code, out, stderr := runAgent(ctx, ownToken, host, `printf %s "$`+testPodEnv+`"`)
			if code != 0 {
				return false, fmt.Errorf("troupe-rsh exited %d: %s", code, stderr)
			}
			return out == pod, nil
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, _, stderr := runAgent(ctx, ownToken, workerHosts[0], "true"); code != 0 {
		t.Errorf("troupe-rsh %s true with the job's own token exited %d: %s", workerHosts[0], code, stderr)
	}
	code, _, stderr := runAgent(ctx, otherToken, workerHosts[0], "true")
	if code == 0 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("troupe-rsh %s true with job %s's token exited %d (%q), want a non-zero exit and a forbidden error",
			workerHosts[0], intruder, code, stderr)
	}
	t.Logf("troupe-rsh with job %s's token: exit %d: %s", intruder, code, strings.TrimSpace(stderr))
	return kubeExecMPIRun{env: ownToken, masterHost: masterHost, dir: dir, program: program, wantRanks: wantRanks}
}

// requireOpenMPI fails early, with what to do, where the test cannot run: it needs Debian's
// Open MPI (make test-e2e installs it with hack/dataplane-deps.sh) and root for unshare --mount.
func requireOpenMPI(t *testing.T) {
	t.Helper()
	for _, tool := range []string{openMPIRun, openMPICC, "unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run hack/dataplane-deps.sh (make test-e2e does)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: mpirun gets an /etc/hosts of its own in a mount namespace")
	}
}

// buildRshAgent builds troupe-agent into dir and returns its troupe-rsh link, as the
// launcher's init container installs it.
func buildRshAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "troupe-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/troupe-agent")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build troupe-agent: %v\n%s", err, out)
	}
	link := filepath.Join(dir, filepath.Base(mpi.KubeExecAgent))
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	return link
}

func mpiCompile(t *testing.T, dir, src string) string {
	t.Helper()
	bin := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".c"))
	if out, err := exec.Command(openMPICC, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", openMPICC, src, err, out)
	}
	return bin
}

// createPodExec makes an exec into pod run on this machine with testPodEnv naming the pod, and
// with a temporary directory of the pod's own (TMPDIR, also the working directory), under dir, as
// each pod has its own /tmp. dir must be short: Open MPI makes Unix sockets in there, whose
// paths may not exceed 107 bytes. The processes the exec starts (Open MPI's daemon and its ranks)
// inherit both. The namespace's deletion removes the Exec.
//
// Open MPI 4's daemon keeps its session directory under $TMPDIR, at a path made of the host name,
// the user and the job (/tmp/ompi.<host>.<uid>/jf.<job family>): the same path for every daemon
// of a job run on one machine. Each daemon removes what it finds there as stale when it starts,
// and writes its topology to one file there (hwloc.sm), so with a shared /tmp the daemons of the
// two worker pods, started together, now and then broke each other: one failed orte_init
// ("A call to mkdir was unable to create the desired directory: .../jf.N/0/2 File exists", exit
// 213) or crashed in hwloc_shmem_topology_write. It had already detached (--daemonize), so
// nothing reported it and mpirun waited for its call back forever: the silent 60 s timeouts of
// 2026-11-23 (docs/testing.md).
func createPodExec(t *testing.T, ns, pod, dir string) {
	t.Helper()
	tmp := filepath.Join(dir, pod)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Exec",
		"metadata":   map[string]any{"name": pod, "namespace": ns},
		"spec": map[string]any{"execs": []any{map[string]any{"local": map[string]any{
			"workDir": tmp,
			"envs": []any{
				map[string]any{"name": testPodEnv, "value": pod},
				map[string]any{"name": "TMPDIR", "value": tmp},
			},
		}}}},
	}}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatalf("create kwok Exec for pod %s: %v", pod, err)
	}
}

// launcherEnv is the environment of the master Job's main container, with the values in
// replace replaced; every one of them must occur.
func launcherEnv(t *testing.T, ns, jobName string, replace map[string]string) []string {
	t.Helper()
	var master batchv1.Job
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jobName}, &master); err != nil {
		t.Fatal(err)
	}
	var main *corev1.Container
	for i, c := range master.Spec.Template.Spec.Containers {
		if c.Name == troupev1.ChainerMainContainer {
			main = &master.Spec.Template.Spec.Containers[i]
		}
	}
	if main == nil {
		t.Fatalf("master Job %s has no %s container", jobName, troupev1.ChainerMainContainer)
	}
	env := os.Environ()
	replaced := map[string]bool{}
	for _, e := range main.Env {
		if e.ValueFrom != nil {
			t.Fatalf("master env %s comes from %+v: this test reads values only", e.Name, e.ValueFrom)
		}
		if local, ok := replace[e.Value]; ok {
			replaced[e.Value] = true
			e.Value = local
		}
		env = append(env, e.Name+"="+e.Value)
	}
	for path := range replace {
		if !replaced[path] {
			t.Fatalf("master env %v does not use %s", main.Env, path)
		}
	}
	t.Logf("launcher environment from Job %s (paths replaced): %v", jobName, env[len(env)-len(main.Env):])
	return env
}

// tokenKubeconfig writes a kubeconfig of the API server's address and CA and a token of the
// ServiceAccount: what a pod running under it holds, and nothing else.
func tokenKubeconfig(t *testing.T, ns, account, dir string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	eventually(t, "a token of ServiceAccount "+account, func(ctx context.Context) (bool, error) {
		err := k8s.SubResource("token").Create(ctx, sa, req)
		return err == nil && req.Status.Token != "", err
	})
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ca := admin.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapiConfig(admin.Host, ca, req.Status.Token)
	path := filepath.Join(dir, account+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runAgent runs "troupe-rsh host command" as Open MPI does, in env, and returns its exit code
// (-1 if it could not run), stdout and stderr.
func runAgent(ctx context.Context, env []string, host, command string) (int, string, string) {
	var agent string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "OMPI_MCA_plm_rsh_agent="); ok {
			first, _, _ := strings.Cut(v, ":") // Open MPI uses the first agent of the list it finds
			agent = strings.TrimSpace(first)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, agent, host, command)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), stdout.String(), stderr.String()
	default:
		return -1, stdout.String(), err.Error()
	}
}

// runMPI runs the real mpirun with env alone, no flags, as the master's command would, for at
// most 60 s, and returns its output. In a pod the master's host name resolves to the pod's own
// address, so Open MPI runs the master's ranks itself; here mpirun runs in a mount namespace of
// its own whose /etc/hosts adds the master's name on loopback. The workers' names resolve
// nowhere on this machine, so Open MPI starts them through the agent.
func runMPI(t *testing.T, env []string, masterHost, dir, program string) string {
	t.Helper()
	system, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, fmt.Appendf(system, "127.0.0.1 %s\n", masterHost), 0o644); err != nil {
		t.Fatal(err)
	}
	// Test harness only: the test runs as root, which Open MPI refuses unless told.
	env = slices.Concat(env, []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts, openMPIRun, program)
	// On timeout mpirun is told to stop, so that it stops its daemons too.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env, cmd.Dir = env, dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s (%.1fs):\n%s", openMPIRun, filepath.Base(program), time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("mpirun: %v (timed out: %v)", err, ctx.Err() != nil)
	}
	return string(out)
}

var rankReport = regexp.MustCompile(`(?m)^rank (\d+) of (\d+) pod (\S+) sum (\d+)$`)

// checkRankReports asserts every rank of the world reported once, with the right sum, and as
// many ranks in each pod as its slots.
func checkRankReports(t *testing.T, out string, wantPerPod map[string]int) {
	t.Helper()
	size := 0
	for _, n := range wantPerPod {
		size += n
	}
	wantSum := size * (size + 1) / 2
	ranks, perPod := map[int]bool{}, map[string]int{}
	for _, m := range rankReport.FindAllStringSubmatch(out, -1) {
		rank, _ := strconv.Atoi(m[1])
		world, _ := strconv.Atoi(m[2])
		sum, _ := strconv.Atoi(m[4])
		if world != size || sum != wantSum {
			t.Errorf("rank %d: world of %d, allreduce sum %d; want %d and %d", rank, world, sum, size, wantSum)
		}
		if ranks[rank] {
			t.Errorf("rank %d reported twice", rank)
		}
		ranks[rank] = true
		perPod[m[3]]++
	}
	if len(ranks) != size {
		t.Errorf("%d ranks reported, want %d (the hostfile's slots)", len(ranks), size)
	}
	if !maps.Equal(perPod, wantPerPod) {
		t.Errorf("ranks per pod (%s: the launcher) = %v, want %v (the pods' slots)", launcherPod, perPod, wantPerPod)
	}
}
