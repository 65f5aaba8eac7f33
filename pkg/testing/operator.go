package testing

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Operator is troupe-operator run as the separate process a user runs against a local cluster
// (`make demo`, the e2e and real-node suites), serving its admission webhooks on this machine.
type Operator struct {
	// LogPath is the operator's log file.
	LogPath string
	// MetricsURL is the operator's Prometheus endpoint (https://127.0.0.1:<port>/metrics),
	// secure as in an install (pkg/metrics.ServerOptions): a self-signed certificate, and only
	// a bearer token the API server authorizes to get /metrics.
	MetricsURL string
	// MetricsToken is such a token: a ServiceAccount's, bound to the install's ClusterRole
	// troupe-metrics-reader (Metrics reads the endpoint with it).
	MetricsToken string
	cmd          *exec.Cmd
	log          *os.File
}

// StartOperator builds troupe-operator from the repository at repoRoot, points the cluster of
// kubeconfig at webhooks served by it (hack/webhooks-local.sh), starts it and waits until it
// reports ready. Its log goes to logPath, or to a temporary file when logPath is empty; flags
// are added to the local cluster's. With $TROUPE_PROGRESS_HOST (an address of this machine the
// cluster's pods reach: the real node's IP) the pods are also given a progress endpoint they
// reach (hack/progress-local.sh); without it, the URL they get is the webhooks' address on this
// machine (what a test reporting for a simulated pod posts to).
func StartOperator(repoRoot, kubeconfig, logPath string, flags ...string) (*Operator, error) {
	dir, err := os.MkdirTemp("", "troupe-operator-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "troupe-operator")
	args := []string{"build", "-o", bin}
	// The commit, as make build stamps it (troupe_build_info), whatever GOFLAGS say of -buildvcs.
	if rev, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output(); err == nil {
		args = append(args, "-ldflags", "-X github.com/troupe-dev/troupe/pkg/version.Revision="+strings.TrimSpace(string(rev)))
	}
	build := exec.Command("go", append(args, "./cmd/troupe-operator")...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build: %w\n%s", err, out)
	}
	probe, err := FreePort()
	if err != nil {
		return nil, err
	}
	hooks, err := FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	_, hookPort, _ := net.SplitHostPort(hooks)
	setup := exec.Command(filepath.Join(repoRoot, "hack", "webhooks-local.sh"), hookPort)
	setup.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if out, err := setup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("webhook configuration: %w\n%s", err, out)
	}
	hookBind := hooks
	if host := os.Getenv("TROUPE_PROGRESS_HOST"); host != "" {
		progress := exec.Command(filepath.Join(repoRoot, "hack", "progress-local.sh"), host, hookPort)
		progress.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if out, err := progress.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("progress endpoint: %w\n%s", err, out)
		}
		hookBind = net.JoinHostPort("0.0.0.0", hookPort)
		const svc = "troupe-progress.troupe-system.svc"
		flags = append([]string{"--webhook-extra-dns-names", svc, "--progress-url", "https://" + svc}, flags...)
	} else {
		flags = append([]string{"--progress-url", "https://localhost:" + hookPort}, flags...)
	}
	token, err := metricsReaderToken(repoRoot, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("metrics reader: %w", err)
	}
	if logPath == "" {
		logPath = filepath.Join(dir, "operator.log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", metrics,
		"--health-probe-bind-address", probe, "--zap-log-level", "2",
		"--webhook-bind-address", hookBind, "--webhook-dns-name", "localhost",
		"--webhook-cert-dir", filepath.Join(dir, "certs"), "--webhook-write-certs"}, flags...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	o := &Operator{LogPath: logPath, MetricsURL: "https://" + metrics + "/metrics", MetricsToken: token, cmd: cmd, log: logFile}
	if err := WaitReady(probe, 200*time.Millisecond, 30*time.Second); err != nil {
		o.Stop()
		return nil, fmt.Errorf("operator not ready (log %s): %w", logPath, err)
	}
	return o, nil
}

// Stop interrupts the operator, as Ctrl-C would, waits for it to exit, and removes its binary
// (about 100 MB a start; the log stays, for the failures that print its path).
func (o *Operator) Stop() {
	_ = o.cmd.Process.Signal(os.Interrupt)
	_ = o.cmd.Wait()
	_ = o.log.Close()
	_ = os.Remove(o.cmd.Path)
}

// FreePort returns a 127.0.0.1 address whose port is free now.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// RemoveOperatorSetup deletes from the cluster of kubeconfig what StartOperator put there for
// a local operator, which an install of troupe would otherwise find and refuse to take over
// (Helm does not adopt objects it did not make): the webhook configurations pointing at this
// machine (hack/webhooks-local.sh), the ClusterRole troupe-metrics-reader and the scraper's
// ServiceAccount and binding (metricsReaderToken), and the namespace troupe-system with the
// certificate Secret and the progress Service (hack/progress-local.sh). The CRDs stay: the
// installs apply their own over them. Call it with the operator stopped.
func RemoveOperatorSetup(repoRoot, kubeconfig string) error {
	for _, args := range [][]string{
		{"delete", "--ignore-not-found", "-f", filepath.Join(repoRoot, "config", "webhook", "manifests.yaml")},
		{"delete", "--ignore-not-found", "clusterrolebinding", metricsReaderName},
		{"delete", "--ignore-not-found", "-n", metricsReaderNamespace, "serviceaccount", metricsReaderName},
		{"delete", "--ignore-not-found", "-f", filepath.Join(repoRoot, "config", "rbac", "operator", "metrics_reader.yaml")},
		{"delete", "--ignore-not-found", "namespace", "troupe-system"},
	} {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
