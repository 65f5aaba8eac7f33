package realnode

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// TestSSHJobs: the SSH transport's other user-reachable shapes, with the training program.
// A ChainerJob over SSH whose master ranks too (Open MPI: its own hostfile line is local, no
// sshd there), with 2 slots on the master and on each of two workers; and an MPIJob whose
// launcher uses a key pair of the user's (ssh.secretName) next to the job's generated host
// key: the workers accept only the user's key, so the run proves the launcher uses it. That
// job keeps its workers after it ends (cleanPodPolicy None): their sshd logs are read after
// success, and the default policy deletes the pods as the test reads them.
func TestSSHJobs(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	mca := "--mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"

	t.Run("chainerjob", func(t *testing.T) {
		testutil.LongOnly(t) // Open MPI over the job's SSH keys is TestMPIJobTraining/openmpi's too
		ns := namespace(t, "realnode-ssh-chainer")
		describeOnFailure(t, ns)
		mustKubectl(t, fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata:
  name: cj
spec:
  transport: SSH
  master:
    mpiConfig: {slots: 2}
    template:
      spec:
%[1]s        containers:
        - name: chainer
          image: %[2]s
          command: [sh, -c, "mpirun %[3]s %[4]s"]
  workerSets:
    ws0:
      replicas: 2
      mpiConfig: {slots: 2}
      template:
        spec:
%[5]s          containers:
          - name: chainer
            image: %[2]s
`, pinned(8), trainImage, mca, trainArgs, pinned(10)), "apply", "-n", ns, "-f", "-")
		took, err := waitCondition(t, ns, "chainerjob.troupe.dev/cj", "Succeeded", 5*time.Minute)
		logs, _ := kubectl("", "logs", "-n", ns, "job/cj-master", "-c", "chainer")
		if err != nil {
			t.Fatalf("the job did not succeed: %v\nmaster log:\n%s", err, logs)
		}
		t.Logf("ChainerJob cj (SSH) Succeeded %.0fs after it was created", took.Seconds())
		checkTraining(t, logs, map[string]int{"cj-master": 2, "cj-workerset-ws0-0": 2, "cj-workerset-ws0-1": 2})
	})

	t.Run("mpijob-user-key", func(t *testing.T) {
		ns := namespace(t, "realnode-ssh-userkey")
		describeOnFailure(t, ns)
		keys, err := mpi.NewSSHKeyMaterial(rand.Reader, "unused.svc")
		if err != nil {
			t.Fatal(err)
		}
		b64 := base64.StdEncoding.EncodeToString
		mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: user-key}
type: kubernetes.io/ssh-auth
data:
  %[1]s: %[2]s
  %[3]s: %[4]s
---
apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata:
  name: train
spec:
  ssh: {secretName: user-key}
  runPolicy: {cleanPodPolicy: None}
  mca: {btl: "self,vader,tcp", btl_tcp_if_include: eth0, oob_tcp_if_include: eth0}
  worker:
    replicas: 2
    slots: 1
    cmd: [%[5]s]
    template:
      spec:
%[6]s        containers:
        - name: mpi-worker
          image: %[7]s
`, troupev1.SSHSecretPrivateKey, b64(keys[mpi.SSHClientKey]), troupev1.SSHSecretAuthorizedKeys, b64(keys[mpi.SSHClientPubKey]),
			yamlArgs(), pinned(8), trainImage), "apply", "-n", ns, "-f", "-")
		took, err := waitCondition(t, ns, "mpijob.troupe.dev/train", "Succeeded", 5*time.Minute)
		logs, _ := kubectl("", "logs", "-n", ns, "job/train-launcher", "-c", "mpi-launcher")
		if err != nil {
			t.Fatalf("the job did not succeed: %v\nlauncher log:\n%s", err, logs)
		}
		t.Logf("MPIJob train (user key) Succeeded %.0fs after it was created", took.Seconds())
		checkTraining(t, logs, map[string]int{"train-worker-0": 1, "train-worker-1": 1})
		// The workers' sshd logs the key it accepted: the user's, by its fingerprint.
		pub, _, _, _, err := ssh.ParseAuthorizedKey(keys[mpi.SSHClientPubKey])
		if err != nil {
			t.Fatal(err)
		}
		sshd := mustKubectl(t, "", "logs", "-n", ns, "train-worker-0")
		if want := "Accepted publickey for mpiuser"; !strings.Contains(sshd, want) || !strings.Contains(sshd, ssh.FingerprintSHA256(pub)) {
			t.Errorf("worker 0's sshd log lacks %q with the user's key %s:\n%s", want, ssh.FingerprintSHA256(pub), sshd)
		}
	})
}
