package realnode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// trainArgs keep the training to seconds: the digits set is small and each epoch a few dozen
// steps per rank; small batches give a six-rank job enough steps to pass 0.9.
const trainArgs = "python3 /opt/troupe/train.py --epochs 30 --batch-size 16"

// yamlArgs is trainArgs as a YAML flow list of strings ("30" must not become a number).
func yamlArgs() string {
	var q []string
	for _, a := range strings.Fields(trainArgs) {
		q = append(q, strconv.Quote(a))
	}
	return strings.Join(q, ", ")
}

var (
	rankLine     = regexp.MustCompile(`(?m)^rank (\d+) of (\d+) on host (\S+)$`)
	epochLine    = regexp.MustCompile(`(?m)^epoch (\d+) loss ([0-9.]+)$`)
	accuracyLine = regexp.MustCompile(`(?m)^test accuracy ([0-9.]+)$`)
)

// checkTraining checks the launcher's log of train.py: as many ranks on each host as wanted
// (the hostfile's slots), every rank of one world, the loss falling from the first epoch to
// the last, a final test accuracy of at least 0.9, and every rank ending with rank 0's weights.
// It logs the lines a user reads.
func checkTraining(t *testing.T, logs string, wantPerHost map[string]int) {
	t.Helper()
	total := 0
	for _, n := range wantPerHost {
		total += n
	}
	perHost := map[string]int{}
	seen := map[int]bool{}
	var summary []string
	for _, m := range rankLine.FindAllStringSubmatch(logs, -1) {
		rank, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		if size != total {
			t.Errorf("rank %d is one of %d ranks, want %d", rank, size, total)
		}
		if seen[rank] {
			t.Errorf("rank %d reported twice", rank)
		}
		seen[rank] = true
		perHost[m[3]]++
		summary = append(summary, m[0])
	}
	if diff := cmp.Diff(wantPerHost, perHost); diff != "" {
		t.Errorf("ranks per host differ from the hostfile's slots (-want +ran):\n%s", diff)
	}
	epochs := epochLine.FindAllStringSubmatch(logs, -1)
	if len(epochs) < 2 {
		t.Fatalf("the log has %d epoch lines, want several:\n%s", len(epochs), logs)
	}
	first, _ := strconv.ParseFloat(epochs[0][2], 64)
	last, _ := strconv.ParseFloat(epochs[len(epochs)-1][2], 64)
	if !(last < first/2) {
		t.Errorf("the loss did not fall: epoch 1 %.4f, epoch %s %.4f", first, epochs[len(epochs)-1][1], last)
	}
	summary = append(summary, epochs[0][0], epochs[len(epochs)-1][0])
	acc := accuracyLine.FindStringSubmatch(logs)
	if acc == nil {
		t.Fatalf("the log has no test accuracy:\n%s", logs)
	}
	if a, _ := strconv.ParseFloat(acc[1], 64); a < 0.9 {
		t.Errorf("test accuracy %.4f, want at least 0.9", a)
	}
	summary = append(summary, acc[0])
	agree := fmt.Sprintf("all %d ranks agree on the final weights", total)
	if !strings.Contains(logs, agree) {
		t.Errorf("the log lacks %q:\n%s", agree, logs)
	}
	t.Logf("training output:\n%s", strings.Join(summary, "\n"))
}

// TestChainerJobTraining: the chainer-operator README's example-job-mn shape (a master that
// runs mpiexec and ranks, one worker set ws0 of two pods, transport KubeExec: no sshd anywhere)
// with the troupe-train image, on the real node. Open MPI starts its daemons in the worker
// pods through troupe-rsh and the API server's pods/exec; the job Succeeds because mpiexec
// exited 0.
func TestChainerJobTraining(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-chainer")
	describeOnFailure(t, ns)
	job := fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata:
  name: example-job-mn
spec:
  backend: mpi
  master:
    template:
      spec:
%[1]s        containers:
        - name: chainer
          image: %[2]s
          command:
          - sh
          - -c
          - |
            mpiexec -n 3 -N 1 --display-map --mca mpi_cuda_support 0 \
            --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
            %[3]s
  workerSets:
    ws0:
      replicas: 2
      template:
        spec:
%[4]s          containers:
          - name: chainer
            image: %[2]s
            command:
            - sh
            - -c
            - |
              while true; do sleep 1 & wait; done
`, pinned(8), trainImage, trainArgs, pinned(10))
	mustKubectl(t, job, "apply", "-n", ns, "-f", "-")
	took, err := waitCondition(t, ns, "chainerjob.troupe.dev/example-job-mn", "Succeeded", 5*time.Minute)
	logs, _ := kubectl("", "logs", "-n", ns, "job/example-job-mn-master", "-c", "chainer")
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nmaster log:\n%s", err, logs)
	}
	t.Logf("example-job-mn Succeeded %.0fs after it was created", took.Seconds())
	checkTraining(t, logs, map[string]int{
		"example-job-mn-master": 1, "example-job-mn-workerset-ws0-0": 1, "example-job-mn-workerset-ws0-1": 1,
	})
}

// TestMPIJobTraining: the same training as an MPIJob whose launcher the operator generates
// (mpirun or mpiexec, mca, extraMPIArgs, cmd) over the SSH transport, three workers running sshd
// with the job's generated keys and two slots each, with Open MPI and with MPICH (Hydra, which
// finds its mpiexec first on the PATH the worker template sets, see images/troupe-mpi). Each
// worker must run exactly two ranks, the launcher none.
func TestMPIJobTraining(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	for _, tc := range []struct {
		name, impl string
		extra      string // more of the job's spec
		env        string // more of the worker container
		long       bool   // only in make test-long: MPICH's run is TestMPI5AndMPICH42's too
	}{
		{name: "openmpi", impl: "OpenMPI", extra: `
  mca: {btl: "self,vader,tcp", btl_tcp_if_include: eth0, oob_tcp_if_include: eth0}`},
		// MPICH reads no MCA parameters; the generated launcher's "mpiexec" must be Hydra's.
		{name: "mpich", impl: "MPICH", long: true, env: `
          env:
          - {name: PATH, value: "/opt/mpich/bin:/usr/local/bin:/usr/bin:/bin"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				testutil.LongOnly(t)
			}
			// With MPICH the job ends only because troupe-mpi preloads mpich-pmi-progress:
			// without it the ranks of Debian's MPICH 4.0.2 hang in MPI_Finalize across pods
			// (docs/mpi.md), and the wait for Succeeded below times out.
			ns := namespace(t, "realnode-mpijob-"+tc.name)
			describeOnFailure(t, ns)
			job := fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata:
  name: train
spec:
  mpiImplementation: %[1]s%[2]s
  worker:
    replicas: 3
    slots: 2
    cmd: [%[3]s]
    template:
      spec:
%[4]s        containers:
        - name: mpi-worker
          image: %[5]s%[6]s
`, tc.impl, tc.extra, yamlArgs(), pinned(8), trainImage, tc.env)
			mustKubectl(t, job, "apply", "-n", ns, "-f", "-")
			took, err := waitCondition(t, ns, "mpijob.troupe.dev/train", "Succeeded", 5*time.Minute)
			logs, _ := kubectl("", "logs", "-n", ns, "job/train-launcher", "-c", "mpi-launcher")
			if err != nil {
				t.Fatalf("the job did not succeed: %v\nlauncher log:\n%s", err, logs)
			}
			t.Logf("MPIJob train (%s) Succeeded %.0fs after it was created", tc.impl, took.Seconds())
			checkTraining(t, logs, map[string]int{"train-worker-0": 2, "train-worker-1": 2, "train-worker-2": 2})
		})
	}
}
