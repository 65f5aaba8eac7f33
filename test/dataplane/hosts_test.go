package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every name the test creates on the machine starts with this prefix, so a run can remove
// what a crashed run left behind.
const prefix = "trpdp"

const (
	subnet     = "10.251.7."
	bridgeName = prefix + "-br"
	// bridgeIP is the node's address on the pod network: readiness checks dial from here, as
	// the kubelet's probes do.
	bridgeIP = subnet + "254"
	// testUserName is the non-root user every container runs as.
	testUserName = prefix + "-mpi"
)

// host is one "machine" of the emulated cluster: a network namespace with one veth address.
// Each pod runs on a host of its own, as pods of one job usually do.
type host struct {
	netns string
	ip    string
}

// cluster is a set of hosts joined by a bridge in the root namespace, like pods on a node.
type cluster struct {
	hosts []*host
}

// newCluster builds n hosts and removes them when the test ends.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	removeLeftovers(t)
	t.Cleanup(func() { removeLeftovers(t) })
	run(t, "ip", "link", "add", bridgeName, "type", "bridge")
	run(t, "ip", "addr", "add", bridgeIP+"/24", "dev", bridgeName)
	run(t, "ip", "link", "set", bridgeName, "up")
	c := &cluster{}
	for i := range n {
		h := &host{netns: fmt.Sprintf("%s-h%d", prefix, i), ip: fmt.Sprintf("%s%d", subnet, 10+i)}
		run(t, "ip", "netns", "add", h.netns)
		// The root end is named like the namespace; the host's end is its eth0.
		run(t, "ip", "link", "add", h.netns, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
		run(t, "ip", "link", "set", h.netns, "master", bridgeName, "up")
		run(t, "ip", "-n", h.netns, "addr", "add", h.ip+"/24", "dev", "eth0")
		run(t, "ip", "-n", h.netns, "link", "set", "eth0", "up")
		run(t, "ip", "-n", h.netns, "link", "set", "lo", "up")
		c.hosts = append(c.hosts, h)
	}
	return c
}

// removeLeftovers kills every process in the test's namespaces and deletes the namespaces, the
// bridge, the namespaces' hosts files and the volume directories.
func removeLeftovers(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Errorf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(ns, prefix+"-") {
			continue
		}
		killNamespace(t, ns)
		if err := exec.Command("ip", "netns", "del", ns).Run(); err != nil {
			t.Errorf("ip netns del %s: %v", ns, err)
		}
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		if out, err := exec.Command("ip", "link", "del", bridgeName).CombinedOutput(); err != nil {
			t.Errorf("ip link del %s: %v: %s", bridgeName, err, out)
		}
	}
	for _, pattern := range []string{"/etc/netns/" + prefix + "-*", filepath.Join(os.TempDir(), prefix+"-*")} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				t.Errorf("remove %s: %v", m, err)
			}
		}
	}
}

// killNamespace kills every process in network namespace ns: whatever the test's sshd or
// mpirun left running there (remote daemons, ranks).
func killNamespace(t *testing.T, ns string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Errorf("ip netns pids %s: %v", ns, err)
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// setDNS writes each host's /etc/hosts (bind-mounted by "ip netns exec" from
// /etc/netns/<ns>/hosts): what the kubelet writes into a pod (localhost and the pod's own
// names) followed by what the cluster's DNS would answer for the job's headless Service: every
// pod's name under it, resolving to that pod's address, and the names of the job's other
// headless Services (bare too, as the pods' DNS search path in the job's namespace resolves
// them) resolving to the pod each selects.
func (c *cluster) setDNS(t *testing.T, pods []pod) {
	t.Helper()
	var dns strings.Builder
	dns.WriteString("# Cluster DNS (emulated): the job's headless Services.\n")
	for i, p := range pods {
		fmt.Fprintf(&dns, "%s\t%s\n", c.hosts[i].ip, p.dnsName)
		for _, name := range p.serviceNames {
			fmt.Fprintf(&dns, "%s\t%s\n", c.hosts[i].ip, name)
		}
	}
	for i, p := range pods {
		h := c.hosts[i]
		hosts := fmt.Sprintf("# Kubernetes-managed hosts file (emulated).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s.cluster.local\t%s\n%s",
			h.ip, p.dnsName, p.hostname, dns.String())
		dir := filepath.Join("/etc/netns", h.netns)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644))
	}
}

// container is a pod's container, ready to start on a host.
type container struct {
	hostname string
	mounts   []bindMount
	uid, gid int64
	groups   []int64
	env      []string
	dir      string // working directory; empty is the image's, "/"
	argv     []string
}

// command returns the command that runs c on h as the kubelet would: in h's network namespace
// (with h's /etc/hosts), in mount and UTS namespaces of its own with the pod's hostname and
// the volumes mounted at their paths, as the container's user with its groups, in its working
// directory, with exactly the container's environment.
func (h *host) command(ctx context.Context, c container) *exec.Cmd {
	var script strings.Builder
	script.WriteString("set -e\nhostname " + shellQuote(c.hostname) + "\n")
	for _, m := range c.mounts {
		fmt.Fprintf(&script, "mount --bind %s %s\n", shellQuote(m.src), shellQuote(m.dst))
		if m.readOnly {
			fmt.Fprintf(&script, "mount -o remount,bind,ro %s\n", shellQuote(m.dst))
		}
	}
	groups := make([]string, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, strconv.FormatInt(g, 10))
	}
	groupsArg := "--clear-groups"
	if len(groups) > 0 {
		groupsArg = "--groups=" + strings.Join(groups, ",")
	}
	// The shell's own PWD and OLDPWD are no part of the container's environment.
	fmt.Fprintf(&script, "unset PWD OLDPWD\nexec setpriv --reuid=%d --regid=%d %s -- \"$@\"\n", c.uid, c.gid, groupsArg)
	args := append([]string{"netns", "exec", h.netns, "unshare", "--mount", "--uts", "--propagation", "private",
		"sh", "-c", script.String(), "sh"}, c.argv...)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	if cmd.Dir == "" {
		cmd.Dir = "/" // the image's working directory
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// process is a long-running container process (a worker's sshd).
type process struct {
	argv []string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start starts c on h; the process is killed when the test ends.
func (h *host) start(t *testing.T, c container) *process {
	t.Helper()
	p := &process{argv: c.argv, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = h.command(context.Background(), c)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v on %s: %v", c.argv, h.netns, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%v on %s did not exit after SIGKILL", c.argv, h.netns)
		}
		killNamespace(t, h.netns)
	})
	return p
}

// waitListening waits, like a TCP readiness probe from the node, until h accepts connections on
// port, and fails early when the process exits.
func (h *host) waitListening(t *testing.T, p *process, port int32, timeout time.Duration) {
	t.Helper()
	addr := net.JoinHostPort(h.ip, strconv.Itoa(int(port)))
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%v on %s exited (%v) before listening on %s:\n%s", p.argv, h.netns, p.err, addr, p.out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening after %v (last error %v); its output:\n%s", addr, timeout, err, p.out)
		}
	}
}

// testUser is the non-root user the containers run as.
type testUser struct {
	name     string
	uid, gid int64
	home     string
}

// ensureTestUser returns the test user, creating it (with a home and a login shell, which sshd
// needs to run the MPI daemons) when it does not exist.
func ensureTestUser(t *testing.T) testUser {
	t.Helper()
	u, err := user.Lookup(testUserName)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		run(t, "useradd", "--create-home", "--shell", "/bin/bash", testUserName)
		u, err = user.Lookup(testUserName)
	}
	if err != nil {
		t.Fatalf("user %s: %v", testUserName, err)
	}
	uid, _ := strconv.ParseInt(u.Uid, 10, 64)
	gid, _ := strconv.ParseInt(u.Gid, 10, 64)
	return testUser{name: u.Username, uid: uid, gid: gid, home: u.HomeDir}
}

// ensureMountPoints creates the (empty) directories the containers' volumes are mounted on and
// removes those it created when the test ends.
func ensureMountPoints(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		var created []string
		for d := p; d != "/" && d != "."; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil {
				break
			}
			created = append(created, d)
		}
		must(t, os.MkdirAll(p, 0o755))
		t.Cleanup(func() {
			for _, d := range created { // deepest first
				_ = os.Remove(d)
			}
		})
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
