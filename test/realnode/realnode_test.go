package realnode

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// podSpec is the spec of a pod of the troupe-mpi image on the real node: it selects the node's
// label and tolerates its taint, as every pod that means to run for real must.
func podSpec(command string) string {
	// A shell or python as PID 1 ignores SIGTERM: do not wait 30 s for it on delete.
	return fmt.Sprintf(`
  terminationGracePeriodSeconds: 1
  nodeSelector: {%[1]s: "true"}
  tolerations: [{key: %[1]s, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: %[2]s
    imagePullPolicy: IfNotPresent
    command: [sh, -c, %[3]q]`, nodeLabel, mpiImage, command)
}

// TestNodes: the real node is Ready with containerd as its runtime, beside the kwok nodes,
// which are Ready too and still kwok's.
func TestNodes(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	t.Log("\n" + mustKubectl(t, "", "get", "nodes", "-o", "wide"))
	out := mustKubectl(t, "", "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.troupe\.dev/real-node} {.status.nodeInfo.containerRuntimeVersion} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	var real, kwok int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[1] == "true" {
			real++
			if !strings.HasPrefix(f[2], "containerd://") || f[3] != "True" {
				t.Errorf("real node %s: runtime %s, Ready %s; want containerd://..., True", f[0], f[2], f[3])
			}
			continue
		}
		kwok++
		if f[len(f)-1] != "True" {
			t.Errorf("kwok node %s is not Ready: %s", f[0], line)
		}
	}
	if real != 1 || kwok == 0 {
		t.Fatalf("want one real node beside kwok nodes, got %d real and %d others:\n%s", real, kwok, out)
	}
}

// TestMPIImage: a pod of troupe-mpi runs Open MPI's mpirun and ompi_info in a container on the
// real node, and its output comes back through kubectl logs.
func TestMPIImage(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	ns := namespace(t, "realnode-mpi")
	mustKubectl(t, `apiVersion: v1
kind: Pod
metadata: {name: mpi-version}
spec:
  restartPolicy: Never`+podSpec("mpirun --version && ompi_info --parsable | grep -E '^ompi:version:full|^mca:btl:tcp'"),
		"apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "-n", ns, "pod/mpi-version", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s")
	logs := mustKubectl(t, "", "logs", "-n", ns, "mpi-version")
	for _, want := range []string{"mpirun (Open MPI) 4.1", "ompi:version:full:4.1", "mca:btl:tcp:"} {
		if !strings.Contains(logs, want) {
			t.Errorf("kubectl logs of the mpirun pod lacks %q:\n%s", want, logs)
		}
	}
	node := mustKubectl(t, "", "get", "-n", ns, "pod/mpi-version", "-o", "jsonpath={.spec.nodeName}")
	labels := mustKubectl(t, "", "get", "node", node, "-o", `jsonpath={.metadata.labels.troupe\.dev/real-node}`)
	if labels != "true" {
		t.Errorf("the pod ran on node %q, not the real node", node)
	}
}

// TestPodsByDNSName: two pods under a headless Service reach each other at
// <pod>.<service>.<namespace>.svc (the names troupe's hostfiles use), a ClusterIP Service
// reaches its pod through kube-proxy from a pod and from this machine (as the API server calls
// a webhook Service), and kubectl exec runs commands in the pods.
func TestPodsByDNSName(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	ns := namespace(t, "realnode-dns")
	// Each pod serves a file holding its own host name on port 8000.
	serve := "mkdir -p /tmp/www && hostname > /tmp/www/name && cd /tmp/www && exec python3 -m http.server 8000"
	var objs strings.Builder
	objs.WriteString(`apiVersion: v1
kind: Service
metadata: {name: hosts}
spec:
  clusterIP: None
  selector: {app: smoke}
  ports: [{port: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: smoke, role: b}
  ports: [{port: 80, targetPort: 8000}]
`)
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&objs, `---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, labels: {app: smoke, role: %[1]s}}
spec:
  hostname: %[1]s
  subdomain: hosts`+podSpec(serve)+`
    readinessProbe: {tcpSocket: {port: 8000}, periodSeconds: 1}
`, name)
	}
	mustKubectl(t, objs.String(), "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "-n", ns, "pod/a", "pod/b", "--for=condition=Ready", "--timeout=120s")

	// fetch runs in pod from and reads url, retrying while DNS catches up with the new pods.
	fetch := func(from, url string) string {
		t.Helper()
		py := fmt.Sprintf(`import time, urllib.request
for i in range(60):
    try:
        print(urllib.request.urlopen(%q, timeout=2).read().decode().strip()); break
    except Exception as e:
        err = e; time.sleep(0.5)
else:
    raise SystemExit("%s: %%s" %% err)`, url, url)
		return strings.TrimSpace(mustKubectl(t, "", "exec", "-n", ns, from, "--", "python3", "-c", py))
	}
	for from, to := range map[string]string{"a": "b", "b": "a"} {
		url := fmt.Sprintf("http://%s.hosts.%s.svc:8000/name", to, ns)
		if got := fetch(from, url); got != to {
			t.Errorf("pod %s fetched %s: got %q, want %q", from, url, got, to)
		}
	}
	if got := fetch("a", "http://web/name"); got != "b" {
		t.Errorf("pod a fetched the ClusterIP Service web: got %q, want b", got)
	}
	ip := mustKubectl(t, "", "get", "-n", ns, "service/web", "-o", "jsonpath={.spec.clusterIP}")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ip + "/name")
	if err != nil {
		t.Fatalf("this machine fetched the ClusterIP Service web (%s): %v", ip, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if body, _ := io.ReadAll(resp.Body); strings.TrimSpace(string(body)) != "b" {
		t.Errorf("this machine fetched the ClusterIP Service web (%s): got %q, want b", ip, body)
	}
}

// TestAPIServerFromPod: a pod on the real node reaches the API server as in-cluster clients
// (the operator, troupe-agent) do: at the kubernetes Service's cluster IP from
// $KUBERNETES_SERVICE_HOST, verifying the server's certificate for that address against the
// ServiceAccount's CA, and by the name kubernetes.default.svc.
func TestAPIServerFromPod(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	ns := namespace(t, "realnode-api")
	py := `import json, os, ssl, urllib.request
ctx = ssl.create_default_context(cafile="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
for host in (os.environ["KUBERNETES_SERVICE_HOST"], "kubernetes.default.svc"):
    print(host, json.load(urllib.request.urlopen("https://" + host + "/version", context=ctx, timeout=10))["gitVersion"])`
	mustKubectl(t, `apiVersion: v1
kind: Pod
metadata: {name: version}
spec:
  restartPolicy: Never`+podSpec("python3 -c '"+py+"'"), "apply", "-n", ns, "-f", "-")
	out, err := kubectl("", "wait", "-n", ns, "pod/version", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s")
	logs, _ := kubectl("", "logs", "-n", ns, "version")
	if err != nil || strings.Count(logs, "v1.35") != 2 {
		t.Errorf("a pod fetching https://kubernetes.default.svc/version: %v %s\nlogs:\n%s", err, out, logs)
	}
}
