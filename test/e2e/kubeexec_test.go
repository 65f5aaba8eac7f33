package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The KubeExec transport end to end: real Open MPI mpirun, with troupe-agent as its rsh agent
// and the job's own ServiceAccount token, starts its remote daemons through the API server's
// pods/exec in the job's worker pods (kwok runs an exec'ed command on this machine, with an
// environment naming the pod), and the ranks add up. The same agent with another job's token
// is refused.
func TestKubeExecRunsMPI(t *testing.T) {
	for _, tool := range []string{"/usr/bin/mpirun.openmpi", "/usr/bin/mpicc.openmpi", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run hack/dataplane-deps.sh (make test-e2e does)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatalf("needs root to give mpirun a hosts file of its own (unshare --mount)")
	}
	ns := newNamespace(t)
	work := t.TempDir()
	_ = os.Chmod(work, 0o755)

	job := testutil.MakeChainerJob("kx", ns).WorkerSet("ws0", 2).Obj()
	job.Spec.Master.MPIConfig = &troupev1.MPIConfig{Slots: ptr.To[int32](1)}
	job.Spec.WorkerSets[0].MPIConfig = &troupev1.MPIConfig{Slots: ptr.To[int32](2)}
	create(t, job)
	create(t, testutil.MakeChainerJob("other", ns).WorkerSet("ws0", 1).Obj())
	waitForJob(t, ns, "kx", "workers ready", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	})
	workers := []string{"kx-workerset-ws0-0", "kx-workerset-ws0-1"}
	for _, pod := range workers {
		podExec(t, ns, pod, work)
	}

	// The real wiring: the hostfile from the job's ConfigMap, the launcher's environment from
	// its Job template. Only paths differ here: the files live in work, not in the volumes
	// /etc/troupe/mpi and /opt/troupe/bin of a pod.
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kx-mpi"}, &cm); err != nil {
		t.Fatal(err)
	}
	hostfile := filepath.Join(work, "hostfile")
	must(t, os.WriteFile(hostfile, []byte(cm.Data[mpi.HostfileKey]), 0o644))
	agent := buildAgent(t, work)
	var master batchv1.Job
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kx-master"}, &master); err != nil {
		t.Fatal(err)
	}
	env := os.Environ()
	for _, e := range master.Spec.Template.Spec.Containers[0].Env {
		switch e.Value {
		case mpi.HostfilePath:
			e.Value = hostfile
		case mpi.KubeExecAgent:
			e.Value = agent
		}
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env,
		"KUBECONFIG="+tokenKubeconfig(t, ns, "kx-exec", work),
		// Test harness: this machine's mpirun runs as root, which Open MPI refuses unless told.
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

	// In a pod the master's own name resolves to its address, so Open MPI runs its ranks
	// locally; here mpirun gets a hosts file of its own where it resolves to loopback. The
	// workers' names do not resolve at all: Open MPI hands them to the agent as they are.
	hosts := filepath.Join(work, "hosts")
	must(t, os.WriteFile(hosts, []byte(fmt.Sprintf("127.0.0.1 localhost kx-master.kx.%s.svc\n", ns)), 0o644))
	program := compile(t, work)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "sh", "-c",
		`mount --bind "$0" /etc/hosts && exec /usr/bin/mpirun.openmpi "$1"`, hosts, program)
	cmd.Env, cmd.Dir = env, work
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	t.Logf("mpirun.openmpi over troupe-rsh (%.1fs):\n%s%s", time.Since(start).Seconds(), out.String(), errOut.String())
	if err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	checkRanks(t, out.String(), map[string]int{"launcher": 1, workers[0]: 2, workers[1]: 2})

	// The agent with the job's own token reaches its pod; with another job's, it is refused.
	if code, stderr := rsh(t, agent, tokenKubeconfig(t, ns, "kx-exec", work), "kx-workerset-ws0-0.kx."+ns+".svc"); code != 0 {
		t.Errorf("troupe-rsh with the job's token exited %d: %s", code, stderr)
	}
	code, stderr := rsh(t, agent, tokenKubeconfig(t, ns, "other-exec", work), "kx-workerset-ws0-0.kx."+ns+".svc")
	if code == 0 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("troupe-rsh with another job's token exited %d (%q), want a refusal", code, stderr)
	}
}

// podExec makes `kubectl exec` into pod run in dir with TROUPE_TEST_POD naming the pod.
func podExec(t *testing.T, ns, pod, dir string) {
	t.Helper()
	e := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
		"metadata": map[string]any{"name": pod, "namespace": ns},
		"spec": map[string]any{"execs": []any{map[string]any{"local": map[string]any{
			"workDir": dir,
			"envs":    []any{map[string]any{"name": "TROUPE_TEST_POD", "value": pod}},
		}}}},
	}}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatalf("kwok Exec for %s: %v", pod, err)
	}
}

// buildAgent builds troupe-agent into dir and returns the path of its troupe-rsh link.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "troupe-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/troupe-agent")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build troupe-agent: %v\n%s", err, out)
	}
	link := filepath.Join(dir, filepath.Base(mpi.KubeExecAgent))
	must(t, os.Symlink("troupe-agent", link))
	return link
}

// tokenKubeconfig writes a kubeconfig holding only the API server's address, its CA and a
// fresh token of the ServiceAccount, as a pod of it would have.
func tokenKubeconfig(t *testing.T, ns, account, dir string) string {
	t.Helper()
	token, err := kubectl("create", "token", account, "-n", ns)
	if err != nil {
		t.Fatalf("token of %s: %v: %s", account, err, token)
	}
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapiConfig(cluster.Server, ca, strings.TrimSpace(token))
	path := filepath.Join(dir, account+".kubeconfig")
	must(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// compile builds testdata/ranks.c with Open MPI's compiler into dir.
func compile(t *testing.T, dir string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "ranks.c"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ranks")
	if out, err := exec.Command("/usr/bin/mpicc.openmpi", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	return bin
}

var rankLine = regexp.MustCompile(`^rank (\d+) of (\d+) pod (\S+) sum (\d+)$`)

// checkRanks asserts every rank reported once, per pod as many as its slots, and the sum.
func checkRanks(t *testing.T, out string, wantPerPod map[string]int) {
	t.Helper()
	total := 0
	for _, n := range wantPerPod {
		total += n
	}
	perPod, seen := map[string]int{}, map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := rankLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		sum, _ := strconv.Atoi(m[4])
		if size != total || sum != total*(total+1)/2 {
			t.Errorf("rank %d: world of %d with sum %d, want %d and %d", rank, size, sum, total, total*(total+1)/2)
		}
		seen[rank] = true
		perPod[m[3]]++
	}
	if len(seen) != total {
		t.Errorf("%d distinct ranks reported, want %d", len(seen), total)
	}
	for pod, n := range wantPerPod {
		if perPod[pod] != n {
			t.Errorf("ranks in %s: %d, want %d (its slots)", pod, perPod[pod], n)
		}
	}
}

// rsh runs the agent as MPI would, "troupe-rsh host true", with the credentials of kubecfg.
func rsh(t *testing.T, agent, kubecfg, host string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, agent, host, "true")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubecfg, mpi.EnvExecContainer+"="+troupev1.ChainerMainContainer)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), stderr.String()
	}
	t.Fatalf("troupe-rsh: %v", err)
	return 0, ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
