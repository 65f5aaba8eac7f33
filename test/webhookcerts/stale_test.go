// Package webhookcerts tests the operator binary's webhook certificate life cycle against real
// API servers (envtest): what `make demo; make demo-down; make demo` does to it.
package webhookcerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

var repoRoot = filepath.Join("..", "..")

// TestStaleCertDir: an operator started with --webhook-write-certs on a cert dir that holds
// the previous cluster's certificate (the demo's cert dir outlives make demo-down) reports
// ready only once it serves the new cluster's certificate: the first create after /readyz
// passes goes through the webhooks, on a first cluster and on a second one started on the
// first one's files.
func TestStaleCertDir(t *testing.T) {
	bin := buildOperator(t)
	certDir := filepath.Join(t.TempDir(), "certs")
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	for i := range 2 {
		t.Run(fmt.Sprintf("cluster%d", i), func(t *testing.T) { clusterRound(t, bin, certDir) })
	}
}

// buildOperator builds the operator binary of this checkout.
func buildOperator(t *testing.T) string {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run with make test-integration")
	}
	bin := filepath.Join(t.TempDir(), "troupe-operator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/troupe-operator")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// clusterRound starts a new API server, the operator on certDir, and creates a job as soon as
// the operator is ready.
func clusterRound(t *testing.T, bin, certDir string) {
	c := startCluster(t)
	logPath := c.startOperator(t, bin, "--webhook-cert-dir", certDir, "--webhook-write-certs")
	c.checkServing(t, logPath, "first")
}

// cluster is an API server with the webhook configurations by URL, as make demo writes them.
type cluster struct {
	k8s        client.Client
	kubeconfig string
	hookPort   string
	hooks      string // host:port the webhooks are served on
}

// startCluster starts a new API server with troupe's CRDs and webhook configurations.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crds")},
		ErrorIfCRDPathMissing: true,
		// A loaded CI machine can take longer than the default 10 s to serve new CRDs.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	began := time.Now()
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	t.Logf("API server up in %v", time.Since(began).Round(time.Millisecond))
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	hooks := freePort(t)
	_, hookPort, _ := net.SplitHostPort(hooks)
	// The webhook configurations by URL, as make demo writes them (with envtest's kubectl).
	setup := exec.Command(filepath.Join(repoRoot, "hack", "webhooks-local.sh"), hookPort)
	setup.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"PATH="+os.Getenv("KUBEBUILDER_ASSETS")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("webhooks-local.sh: %v\n%s", err, out)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{k8s: k8s, kubeconfig: kubeconfig, hookPort: hookPort, hooks: hooks}
}

// startOperator runs the operator binary against the cluster with more flags, and returns
// once it is ready (its log is shown if the test fails).
func (c *cluster) startOperator(t *testing.T, bin string, flags ...string) (logPath string) {
	t.Helper()
	probe := freePort(t)
	logPath = filepath.Join(t.TempDir(), "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	op := exec.Command(bin, append([]string{"--kubeconfig", c.kubeconfig, "--metrics-bind-address", "0",
		"--health-probe-bind-address", probe, "--webhook-bind-address", c.hooks,
		"--webhook-dns-name", "localhost"}, flags...)...)
	op.Stdout, op.Stderr = logFile, logFile
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = op.Process.Signal(os.Interrupt)
		_ = op.Wait()
		_ = logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("operator log:\n%s", out)
		}
	})
	start := time.Now()
	if err := testutil.WaitReady(probe, 20*time.Millisecond, 60*time.Second); err != nil {
		t.Fatalf("operator not ready: %v", err)
	}
	t.Logf("operator ready %v after start", time.Since(start).Round(time.Millisecond))
	return logPath
}

// checkServing: the certificate the webhooks serve verifies against the CA the configurations
// hold, and a job created right away (named name) is defaulted by the webhooks.
func (c *cluster) checkServing(t *testing.T, logPath, name string) {
	t.Helper()
	k8s := c.k8s
	// What the API server does next: the served certificate must verify against the CA that
	// the configurations hold, from the moment the operator is ready.
	conn, err := tls.Dial("tcp", c.hooks, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // verified below
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	var hookConfig admissionv1.ValidatingWebhookConfiguration
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "troupe-validating-webhook-configuration"}, &hookConfig); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(hookConfig.Webhooks[0].ClientConfig.CABundle)
	if _, err := served.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots}); err != nil {
		t.Errorf("ready, but the served certificate (issuer %q, from %v) does not verify against the webhooks' CA: %v",
			served.Issuer, served.NotBefore, err)
	}

	job := &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: troupev1.ChainerJobSpec{
			Backend: troupev1.ChainerBackendMPI,
			Master: troupev1.ChainerMaster{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "chainer", Image: "troupe-train"}},
			}}},
		},
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("the first create after readiness: %v", err)
	}
	// The mutating webhook ran: it is what sets the master's slots.
	if job.Spec.Master.MPIConfig == nil || job.Spec.Master.MPIConfig.Slots == nil {
		t.Errorf("the job was not defaulted by the webhook: master.mpiConfig %+v", job.Spec.Master.MPIConfig)
	}
	if strings.Contains(readFile(t, logPath), "unknown authority") {
		t.Errorf("the operator log mentions a certificate of an unknown authority")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
