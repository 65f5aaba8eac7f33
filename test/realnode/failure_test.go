package realnode

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// failProgram is an MPI program whose rank 1 fails (an exception; run under
// "python3 -m mpi4py", which turns it into MPI_Abort, as a real program's unhandled error must:
// a plain exit would wait in MPI_Finalize for ranks that never come) while the others compute
// (sleep); rank 2 has first started a child in a session of its own, as a data loader or a
// daemonised helper would, which mpirun's teardown of the ranks does not reach. Every process
// carries the attempt's TROUPE_TEST_ATTEMPT (mpiexec -x).
const failProgram = `import os, subprocess, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
print("rank", rank, "attempt", os.environ["TROUPE_TEST_ATTEMPT"], flush=True)
if rank == 2:
    subprocess.Popen(["sleep", "600"], start_new_session=True)
comm.Barrier()
if rank == 1:
    time.sleep(2)
    raise RuntimeError("rank 1 fails")
time.sleep(600)
`

var attemptLine = regexp.MustCompile(`(?m)^attempt (\d+)$`)

// TestFailingRank: a ChainerJob (KubeExec) whose program fails on one rank, with
// backoffLimit 1, ends Failed with mpiexec's own words in its Failed condition, after exactly
// two launcher attempts; when the second attempt starts, its wait step kills what the first
// left in the workers, so no process of the first attempt runs in any worker pod afterwards.
// The workers are kept (cleanPodPolicy None) to look inside them; the second attempt's
// escaped child is still there, which shows that mpiexec's teardown alone leaves processes
// behind.
func TestFailingRank(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	ns := namespace(t, "realnode-fail")
	describeOnFailure(t, ns)
	volume := `
          volumes: [{name: prog, configMap: {name: fail-prog}}]`
	mount := `
            volumeMounts: [{name: prog, mountPath: /opt/test}]`
	var prog strings.Builder
	for _, l := range strings.Split(failProgram, "\n") {
		prog.WriteString("    " + l + "\n")
	}
	objs := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: fail-prog}
data:
  fail.py: |
%[1]s---
apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata:
  name: fail
spec:
  runPolicy: {cleanPodPolicy: None}
  master:
    backoffLimit: 1
    template:
      spec:
%[2]s        containers:
        - name: chainer
          image: %[3]s
          command:
          - sh
          - -c
          - |
            export TROUPE_TEST_ATTEMPT=$(date +%%s%%N)
            echo "attempt $TROUPE_TEST_ATTEMPT"
            exec mpiexec -n 3 -N 1 -x TROUPE_TEST_ATTEMPT \
              --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
              python3 -m mpi4py /opt/test/fail.py%[4]s%[5]s
  workerSets:
    ws0:
      replicas: 2
      template:
        spec:
%[6]s          containers:
          - name: chainer
            image: %[3]s
            command: [sh, -c, "while true; do sleep 1 & wait; done"]%[7]s%[8]s
`, prog.String(), pinned(8), mpiImage, strings.ReplaceAll(mount, "\n            ", "\n          "), strings.ReplaceAll(volume, "\n          ", "\n        "),
		pinned(10), mount, volume)
	mustKubectl(t, objs, "apply", "-n", ns, "-f", "-")
	took, err := waitCondition(t, ns, "chainerjob.troupe.dev/fail", "Failed", 4*time.Minute)
	if err != nil {
		t.Fatalf("the job did not fail: %v", err)
	}
	t.Logf("the job Failed %.0fs after it was created", took.Seconds())

	cond := mustKubectl(t, "", "get", "-n", ns, "chainerjob.troupe.dev/fail", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].reason}: {.status.conditions[?(@.type=="Failed")].message}`)
	t.Logf("Failed condition: %s", cond)
	// The launcher's own words, after the Job's reason; whitespace as one space.
	flat := strings.Join(strings.Fields(cond), " ")
	for _, want := range []string{"BackoffLimitExceeded: ", "container chainer of pod fail-master-", "MPI_ABORT was invoked on rank 1"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the Failed condition lacks %q: %s", want, cond)
		}
	}

	// The launcher attempts, oldest first, and the attempt each one ran.
	out := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=fail-master",
		"--sort-by=.metadata.creationTimestamp", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`)
	var attempts []string
	var launchers []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] != "Failed" {
			t.Errorf("launcher pod %q: want phase Failed", line)
			continue
		}
		launchers = append(launchers, f[0])
		logs := mustKubectl(t, "", "logs", "-n", ns, f[0], "-c", "chainer")
		m := attemptLine.FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("launcher %s printed no attempt:\n%s", f[0], logs)
		}
		attempts = append(attempts, m[1])
	}
	if len(attempts) != 2 {
		t.Fatalf("%d launcher attempts (%v), want 2 (backoffLimit 1)", len(attempts), launchers)
	}
	wait := mustKubectl(t, "", "logs", "-n", ns, launchers[1], "-c", "troupe-wait")
	t.Logf("second attempt's wait:\n%s", wait)

	// Every attempt whose processes still run in each worker pod.
	find := `for d in /proc/[0-9]*; do tr '\0' '\n' 2>/dev/null <"$d/environ" | grep '^TROUPE_TEST_ATTEMPT='; done | sort -u`
	var lastSeen bool
	for _, w := range []string{"fail-workerset-ws0-0", "fail-workerset-ws0-1"} {
		got := strings.Fields(strings.ReplaceAll(mustKubectl(t, "", "exec", "-n", ns, w, "--", "sh", "-c", find), "TROUPE_TEST_ATTEMPT=", ""))
		t.Logf("attempts with processes in %s: %v", w, got)
		if slices.Contains(got, attempts[0]) {
			t.Errorf("processes of the first attempt (%s) still run in %s", attempts[0], w)
		}
		lastSeen = lastSeen || slices.Contains(got, attempts[1])
	}
	if !lastSeen {
		t.Errorf("the second attempt's escaped child is not in any worker: the test no longer shows that leftovers happen")
	}
}
