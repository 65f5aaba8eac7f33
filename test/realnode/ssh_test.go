package realnode

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// TestMPIOverSSH: the troupe-mpi image serves troupe's generated SSH wiring as its non-root
// user: two worker pods run sshd with the operator's sshd_config and a job's key material
// (mpi.NewSSHKeyMaterial, mounted as the operator mounts them), and a launcher pod runs Open
// MPI's mpirun, with the Open MPI dialect's hostfile and environment, through the generated rsh
// agent to one rank on each worker, by their DNS names, with mpi4py's allreduce across the two
// pods.
func TestMPIOverSSH(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	ns := namespace(t, "realnode-ssh")
	domain := "job." + ns + ".svc"
	keys, err := mpi.NewSSHKeyMaterial(rand.Reader, domain)
	if err != nil {
		t.Fatal(err)
	}
	var secret strings.Builder
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&secret, "  %s: %s\n", k, base64.StdEncoding.EncodeToString(keys[k]))
	}
	port := mpi.DefaultSSHPort
	dialect, err := mpi.DialectFor(mpi.OpenMPI)
	if err != nil {
		t.Fatal(err)
	}
	// The SSH transport's own files (sshd_config, ssh_config, the rsh agent), as the operator
	// writes them into a job's ConfigMap, so that this test follows what troupe generates.
	files := mpi.SSH{}.ConfigFiles(nil)
	files["hostfile"] = dialect.Hostfile([]mpi.Host{{Name: "w0." + domain, Slots: 1}, {Name: "w1." + domain, Slots: 1}})
	var config strings.Builder
	for _, k := range []string{"hostfile", mpi.SSHDConfigKey, mpi.SSHClientConfigKey, mpi.SSHAgentKey} {
		fmt.Fprintf(&config, "  %s: %q\n", k, files[k])
	}
	// The Secret's files at 0440 for the pod's fsGroup, as the operator mounts them for a
	// non-root user; the rsh agent executable.
	volumes := `
  securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
  volumes:
  - {name: ssh, secret: {secretName: job-ssh, defaultMode: 0440}}
  - {name: mpi, configMap: {name: job-mpi, defaultMode: 0755}}`
	mounts := fmt.Sprintf(`
    volumeMounts:
    - {name: ssh, mountPath: %s, readOnly: true}
    - {name: mpi, mountPath: %s, readOnly: true}`, mpi.SSHMountPath, mpi.ConfigMountPath)

	objs := `apiVersion: v1
kind: Secret
metadata: {name: job-ssh}
data:
` + secret.String() + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: job-mpi}
data:
` + config.String() + `---
apiVersion: v1
kind: Service
metadata: {name: job}
spec:
  clusterIP: None
  selector: {app: ssh-smoke}
`
	for _, w := range []string{"w0", "w1"} {
		objs += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, labels: {app: ssh-smoke}}
spec:
  hostname: %[1]s
  subdomain: job`, w) + volumes + podSpec(fmt.Sprintf("exec /usr/sbin/sshd -D -e -f %s/%s", mpi.ConfigMountPath, mpi.SSHDConfigKey)) + mounts +
			fmt.Sprintf("\n    readinessProbe: {tcpSocket: {port: %d}, periodSeconds: 1}\n", port)
	}
	mustKubectl(t, objs, "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "-n", ns, "pod/w0", "pod/w1", "--for=condition=Ready", "--timeout=120s")

	prog := `from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; ` +
		`print("rank", c.rank, "on", socket.gethostname(), "sum", c.allreduce(c.rank + 1), flush=True)`
	// The launcher waits until both workers' names resolve, as troupe's launcher does (its
	// troupe-wait): a pod is Ready before its headless Service's record reaches the cluster's
	// DNS, and on a loaded machine ssh asked first ("Could not resolve hostname").
	launch := "for h in w0." + domain + " w1." + domain + "; do until getent hosts $h >/dev/null; do sleep 1; done; done; " +
		"mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 python3 -c '" + prog + "'"
	// The launcher finds the hostfile and the rsh agent through the dialect's environment.
	var env strings.Builder
	env.WriteString("\n    env:")
	for _, e := range dialect.Env(mpi.ConfigMountPath+"/hostfile", mpi.ConfigMountPath+"/"+mpi.SSHAgentKey) {
		fmt.Fprintf(&env, "\n    - {name: %s, value: %q}", e.Name, e.Value)
	}
	mustKubectl(t, `apiVersion: v1
kind: Pod
metadata: {name: launcher}
spec:
  restartPolicy: Never`+volumes+podSpec(launch)+mounts+env.String()+"\n", "apply", "-n", ns, "-f", "-")
	_, err = kubectl("", "wait", "-n", ns, "pod/launcher", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s")
	logs, _ := kubectl("", "logs", "-n", ns, "launcher")
	if err != nil {
		t.Fatalf("the launcher did not succeed: %v\nlogs:\n%s", err, logs)
	}
	t.Log("launcher logs:\n" + logs)
	for _, want := range []string{"rank 0 on w0 sum 3", "rank 1 on w1 sum 3"} {
		if !strings.Contains(logs, want) {
			t.Errorf("launcher logs lack %q:\n%s", want, logs)
		}
	}
}
