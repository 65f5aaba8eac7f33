package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

var (
	kubeflowImagesOnce sync.Once
	kubeflowImagesErr  error
)

// needKubeflowImages puts the images kubeflow's pi examples name (docker.io/mpioperator/
// mpi-pi:openmpi and :mpich, built here from images/mpi-pi) into the real node's registry,
// once: pods with imagePullPolicy Always pull them from there, the others too.
func needKubeflowImages(t *testing.T) {
	t.Helper()
	kubeflowImagesOnce.Do(func() {
		start := time.Now()
		out, err := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "realnode-images.sh"),
			"--push", "mpi-pi-openmpi", "mpi-pi-mpich").CombinedOutput()
		if err != nil {
			kubeflowImagesErr = fmt.Errorf("%w\n%s", err, out)
			return
		}
		t.Logf("mpi-pi images in the real node's registry in %.1fs", time.Since(start).Seconds())
	})
	if kubeflowImagesErr != nil {
		t.Fatalf("push the mpi-pi images: %v", kubeflowImagesErr)
	}
}

// kubeflowPi is one of kubeflow's published pi examples with only its apiVersion changed, and,
// when cpu is not "", every container's CPU limit set to cpu.
func kubeflowPi(t *testing.T, file, cpu string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "test", "manifests", "kubeflow", file))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	obj["apiVersion"] = "troupe.dev/v1alpha1"
	if cpu != "" {
		specs := obj["spec"].(map[string]any)["mpiReplicaSpecs"].(map[string]any)
		for _, replica := range specs {
			pod := replica.(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			for _, c := range pod["containers"].([]any) {
				limits := c.(map[string]any)["resources"].(map[string]any)["limits"].(map[string]any)
				limits["cpu"] = cpu
			}
		}
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestKubeflowPi runs kubeflow's published pi examples on the real node with their images as
// named (built here in the layout of kubeflow's, with a pi program of troupe's): pi.yaml with
// Open MPI 5 (PRRTE/PMIx) and pi-mpich.yaml with MPICH 4.2 (imagePullPolicy Always: pulled from
// the node's registry), each over kubeflow's SSH (the workers' own sshd as mpiuser on port 2222,
// the job's key pair at /home/mpiuser/.ssh). The launcher's log shows pi and every rank's host.
//
// The one change beside apiVersion: each of the three pods asks 1 CPU, and this machine's
// real node has 2; as written, the job says its third pod is Unschedulable for Insufficient
// cpu (checked first), so the runs ask 500m each.
func TestKubeflowPi(t *testing.T) {
	// Not side by side: kubeflow's pi pods ask for whole CPUs of the real node (suite_test.go).
	needOperator(t)
	realNodeOnly(t) // the examples select no node: they must land on the real one
	needKubeflowImages(t)

	asWritten := namespace(t, "realnode-kubeflow-as-written")
	mustKubectl(t, kubeflowPi(t, "pi.yaml", ""), "create", "-n", asWritten, "-f", "-")
	took := waitJSONPath(t, asWritten, "mpijob/pi", "{.status.reason}", "Unschedulable", 60*time.Second)
	msg := mustKubectl(t, "", "get", "-n", asWritten, "mpijob/pi", "-o",
		`jsonpath={.status.conditions[?(@.type=="WorkersReady")].message}{.status.conditions[?(@.type=="Running")].message}`)
	if !strings.Contains(msg, "Insufficient cpu") {
		t.Errorf("pi.yaml as written: Unschedulable, but not for cpu: %s", msg)
	}
	t.Logf("pi.yaml as written (3 pods of 1 CPU on a node of %s CPUs): Unschedulable after %s: %s",
		strings.TrimSpace(mustKubectl(t, "", "get", "nodes", "-l", nodeLabel+"=true", "-o", "jsonpath={.items[0].status.allocatable.cpu}")),
		took.Round(time.Second), msg)
	mustKubectl(t, "", "delete", "-n", asWritten, "mpijob/pi", "--wait=true")

	for _, example := range []struct {
		file, mpi string
		long      bool // only in make test-long: MPICH 4.2 over SSH is TestMPI5AndMPICH42/mpich42-ssh's too
	}{
		{file: "pi.yaml", mpi: "Open MPI"},
		{file: "pi-mpich.yaml", mpi: "MPICH", long: true},
	} {
		t.Run(example.file, func(t *testing.T) {
			if example.long {
				testutil.LongOnly(t)
			}
			ns := namespace(t, "realnode-kubeflow-"+strings.TrimSuffix(example.file, ".yaml"))
			runKubeflowPi(t, ns, example.file, example.mpi)
		})
	}
}

// runKubeflowPi runs one of kubeflow's pi examples (file, of the MPI named mpi) with 500m CPU
// limits in ns to Succeeded over kubeflow's SSH, and checks that the launcher's log gives pi
// from a rank on each of the two workers.
func runKubeflowPi(t *testing.T, ns, file, mpi string) {
	t.Helper()
	describeOnFailure(t, ns)
	mustKubectl(t, kubeflowPi(t, file, "500m"), "create", "-n", ns, "-f", "-")
	took, err := waitCondition(t, ns, "mpijob/pi", "Succeeded", 240*time.Second)
	logs, _ := kubectl("", "logs", "-n", ns, "job/pi-launcher", "--all-containers=false")
	if err != nil {
		t.Fatalf("%s did not succeed: %v\nlauncher log:\n%s", file, err, logs)
	}
	pi := regexp.MustCompile(`pi is approximately 3\.14159265\d*, error \S+, from 2 ranks`).FindString(logs)
	if pi == "" {
		t.Errorf("the launcher's log does not give pi from 2 ranks:\n%s", logs)
	}
	for rank, host := range []string{"pi-worker-0", "pi-worker-1"} {
		if !regexp.MustCompile(fmt.Sprintf(`rank \d of 2 on host %s\b`, host)).MatchString(logs) {
			t.Errorf("no rank ran on %s (rank %d's host):\n%s", host, rank, logs)
		}
	}
	t.Logf("%s (%s) Succeeded in %s: %s", file, mpi, took.Round(time.Second), pi)
}

// TestMPI5AndMPICH42 runs the MPIs of Debian trixie across troupe's own pods, with troupe's
// transports: Open MPI 5.0.7 (mpiImplementation OpenMPI5: prterun, PRRTE's PRTE_MCA_*
// environment) launched with the CANOPIE-HPC seed's mapping, prterun --map-by ppr:2:node, over
// the SSH transport and over KubeExec; and MPICH 4.2.1 over SSH, without the preload troupe's
// own image needs for MPICH 4.0. Each runs the pi program of the mpi-pi images on two workers
// of two slots: 4 ranks, two on each worker.
func TestMPI5AndMPICH42(t *testing.T) {
	// Not side by side: kubeflow's pi pods ask for whole CPUs of the real node (suite_test.go).
	needOperator(t)
	needKubeflowImages(t)
	// Over SSH the worker runs troupe's sshd; over KubeExec it runs its own command, which must
	// last (the image's is a shell that exits).
	const sleep = "[sleep, infinity]"
	for _, tc := range []struct{ name, impl, transport, image, args, command string }{
		{"openmpi5-ssh", "OpenMPI5", "SSH", "docker.io/mpioperator/mpi-pi:openmpi", "[--map-by, ppr:2:node]", "[]"},
		{"openmpi5-kubeexec", "OpenMPI5", "KubeExec", "docker.io/mpioperator/mpi-pi:openmpi", "[--map-by, ppr:2:node]", sleep},
		{"mpich42-ssh", "MPICH", "SSH", "docker.io/mpioperator/mpi-pi:mpich", "[-ppn, \"2\"]", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, "realnode-"+tc.name)
			describeOnFailure(t, ns)
			mustKubectl(t, fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata: {name: pi}
spec:
  mpiImplementation: %[1]s
  transport: %[2]s
  worker:
    replicas: 2
    slots: 2
    extraMPIArgs: %[3]s
    cmd: [/home/mpiuser/pi]
    template:
      spec:
%[4]s        containers:
        - name: mpi-worker
          image: %[5]s
          command: %[6]s
          resources: {limits: {cpu: 500m, memory: 512Mi}}
`, tc.impl, tc.transport, tc.args, pinned(8), tc.image, tc.command), "create", "-n", ns, "-f", "-")
			took, err := waitCondition(t, ns, "mpijob/pi", "Succeeded", 240*time.Second)
			logs, _ := kubectl("", "logs", "-n", ns, "job/pi-launcher", "-c", "mpi-launcher")
			if err != nil {
				t.Fatalf("the job did not succeed: %v\nlauncher log:\n%s", err, logs)
			}
			if !regexp.MustCompile(`pi is approximately 3\.14159265\d*, error \S+, from 4 ranks`).MatchString(logs) {
				t.Errorf("the launcher's log does not give pi from 4 ranks:\n%s", logs)
			}
			for _, host := range []string{"pi-worker-0", "pi-worker-1"} {
				if n := len(regexp.MustCompile(`rank \d of 4 on host `+host+`\b`).FindAllString(logs, -1)); n != 2 {
					t.Errorf("%d ranks on %s, want 2 (ppr:2:node):\n%s", n, host, logs)
				}
			}
			t.Logf("%s over %s Succeeded in %s", tc.impl, tc.transport, took.Round(time.Second))
		})
	}
}
