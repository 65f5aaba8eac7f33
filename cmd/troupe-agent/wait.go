package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// terminationLogPath is where Kubernetes reads a container's termination message from.
var terminationLogPath = "/dev/termination-log"

type waitConfig struct {
	hostfile   string
	timeout    time.Duration
	transport  string
	port       int
	installTo  string
	probeEvery time.Duration
	minHosts   int
	bestEffort bool
}

// wait installs the agent for the launcher, then waits until every other host of the
// hostfile resolves and accepts the transport, or the timeout passes: exit 0 when all are
// reachable, mpi.WaitTimeoutExitCode (with the missing hosts in the termination message) when
// time ran out, 1 on a setup error.
func wait(args []string) int {
	cfg := waitConfig{}
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	fs.StringVar(&cfg.hostfile, "hostfile", mpi.HostfilePath, "Hostfile listing the hosts to wait for.")
	fs.DurationVar(&cfg.timeout, "timeout", time.Duration(mpi.DefaultWaitTimeoutSeconds)*time.Second, "How long to wait at most.")
	fs.StringVar(&cfg.transport, "transport", string(troupev1.MPITransportKubeExec), "How hosts are reached: SSH (TCP to --port), KubeExec (exec into the pod) or DNS (resolve only).")
	fs.IntVar(&cfg.port, "port", int(mpi.DefaultSSHPort), "sshd port of the hosts (SSH transport).")
	fs.StringVar(&cfg.installTo, "install-to", "", "Directory to install troupe-agent and its troupe-rsh link into first.")
	fs.DurationVar(&cfg.probeEvery, "interval", 2*time.Second, "Time between two rounds of checks.")
	fs.IntVar(&cfg.minHosts, "min-hosts", 0, "Succeed once this many of the other hosts are reachable (elastic jobs); 0 waits for all.")
	fs.BoolVar(&cfg.bestEffort, "best-effort", false, "Exit 0 when the timeout passes with hosts missing, naming them (debug mode: the launcher must come up whatever the workers run).")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.installTo != "" {
		if err := install(cfg.installTo); err != nil {
			fmt.Fprintf(os.Stderr, "troupe-agent wait: install: %v\n", err)
			return 1
		}
	}
	hosts, err := hostsToWaitFor(cfg.hostfile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-agent wait: %v\n", err)
		return 1
	}
	check, err := checker(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-agent wait: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	need := len(hosts)
	if cfg.minHosts > 0 && cfg.minHosts < need {
		need = cfg.minHosts
	}
	missing, lastErr := waitForHosts(ctx, hosts, need, check, cfg.probeEvery, os.Stderr)
	if len(hosts)-len(missing) >= need {
		fmt.Fprintf(os.Stderr, "troupe-agent wait: %d of %d hosts reachable over %s\n", len(hosts)-len(missing), len(hosts), cfg.transport)
		if cfg.transport == string(troupev1.MPITransportKubeExec) {
			reapHosts(ctx, slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return slices.Contains(missing, h) }), os.Stderr)
		}
		return 0
	}
	msg := fmt.Sprintf("%d of %d hosts still unreachable over %s after %s: %s (last error: %v)",
		len(missing), len(hosts), cfg.transport, cfg.timeout, strings.Join(missing, ", "), lastErr)
	if cfg.bestEffort {
		fmt.Fprintln(os.Stderr, "troupe-agent wait:", msg+"; continuing without them (--best-effort)")
		return 0
	}
	fmt.Fprintln(os.Stderr, "troupe-agent wait:", msg)
	_ = os.WriteFile(terminationLogPath, []byte(msg), 0o644)
	return int(mpi.WaitTimeoutExitCode)
}

// install copies the running binary into dir and links the rsh name to it, so the launcher's
// containers, whose image knows nothing of troupe, can run it.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	dst := filepath.Join(dir, "troupe-agent")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	link := filepath.Join(dir, rshName)
	_ = os.Remove(link)
	return os.Symlink("troupe-agent", link)
}

// hostsToWaitFor reads the hostfile and drops this pod's own entry: the launcher does not
// wait for itself.
func hostsToWaitFor(path string) ([]string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	hosts, err := mpi.ParseHostfile(string(text))
	if err != nil {
		return nil, err
	}
	self, _ := os.Hostname()
	var names []string
	for _, h := range hosts {
		if first, _, _ := strings.Cut(h.Name, "."); first == self || h.Name == self {
			continue
		}
		names = append(names, h.Name)
	}
	return names, nil
}

// checkFunc reports why a host is not reachable yet, or nil.
type checkFunc func(ctx context.Context, host string) error

func checker(cfg waitConfig) (checkFunc, error) {
	resolve := func(ctx context.Context, host string) error {
		_, err := net.DefaultResolver.LookupHost(ctx, host)
		return err
	}
	switch cfg.transport {
	case "DNS":
		return resolve, nil
	case string(troupev1.MPITransportSSH):
		return func(ctx context.Context, host string) error {
			if err := resolve(ctx, host); err != nil {
				return err
			}
			return sshBanner(ctx, net.JoinHostPort(host, strconv.Itoa(cfg.port)))
		}, nil
	case string(troupev1.MPITransportKubeExec):
		return func(ctx context.Context, host string) error {
			if err := resolve(ctx, host); err != nil {
				return err
			}
			if err := podReady(ctx, host); err != nil {
				return err
			}
			code, err := execInPod(ctx, host, []string{"true"}, nil, io.Discard, io.Discard)
			if err == nil && code != 0 {
				err = fmt.Errorf("exec of true exited %d", code)
			}
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown transport %q: use SSH, KubeExec or DNS", cfg.transport)
}

// sshBanner connects to addr and reads the SSH identification line, so a port that accepts
// connections but is not sshd (yet) does not count.
func sshBanner(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no SSH banner from %s: %w", addr, err)
	}
	if !strings.HasPrefix(line, "SSH-") {
		return fmt.Errorf("%s is not an SSH server: %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// waitForHosts checks the hosts not reachable yet in rounds until at least need of them are
// reachable or ctx ends; it returns the hosts still missing and the last error seen. Progress
// goes to log when the set of missing hosts changes.
func waitForHosts(ctx context.Context, hosts []string, need int, check checkFunc, interval time.Duration, log io.Writer) ([]string, error) {
	missing := slices.Clone(hosts)
	var lastErr error
	reported := -1
	for {
		var still []string
		for _, h := range missing {
			if err := check(ctx, h); err != nil {
				still = append(still, h)
				lastErr = fmt.Errorf("%s: %w", h, err)
			}
		}
		missing = still
		if len(hosts)-len(missing) >= need {
			return missing, nil
		}
		if len(missing) != reported {
			_, _ = fmt.Fprintf(log, "troupe-agent wait: waiting for %d of %d hosts: %s\n", len(missing), len(hosts), strings.Join(missing, ", "))
			reported = len(missing)
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return missing, lastErr
		case <-time.After(interval):
		}
	}
}
