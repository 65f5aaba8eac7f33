package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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
	// mpiImage is the image every container runs: troupe-mpi as make images builds it (the
	// name of hack/versions.mk), so the test proves the image troupe ships.
	mpiImage = "ghcr.io/troupe-dev/troupe-mpi:v0.1.0"
	// containerLabel marks the test's containers, so a run can remove what a crashed one left.
	containerLabel = "dev.troupe.test=" + prefix
)

// imageUser is troupe-mpi's non-root user (mpiuser), as which every container runs: sshd
// serves only users of the image's /etc/passwd.
var imageUser = testUser{uid: 1000, gid: 1000}

// podman runs every container with runc and explicit limits: crun cannot run on this
// machine's cgroups, and podman's default limits cannot be set here (docs/images.md).
var podmanRun = []string{"run", "--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

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
	ip(t, "link", "add", bridgeName, "type", "bridge")
	ip(t, "addr", "add", bridgeIP+"/24", "dev", bridgeName)
	ip(t, "link", "set", bridgeName, "up")
	c := &cluster{}
	for i := range n {
		h := &host{netns: fmt.Sprintf("%s-h%d", prefix, i), ip: fmt.Sprintf("%s%d", subnet, 10+i)}
		ip(t, "netns", "add", h.netns)
		// The root end is named like the namespace; the host's end is its eth0.
		ip(t, "link", "add", h.netns, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
		ip(t, "link", "set", h.netns, "master", bridgeName, "up")
		ip(t, "-n", h.netns, "addr", "add", h.ip+"/24", "dev", "eth0")
		ip(t, "-n", h.netns, "link", "set", "eth0", "up")
		ip(t, "-n", h.netns, "link", "set", "lo", "up")
		c.hosts = append(c.hosts, h)
	}
	return c
}

// removeLeftovers removes the test's containers, kills every process left in the test's
// namespaces and deletes the namespaces, the bridge, the namespaces' hosts files and the
// volume directories.
func removeLeftovers(t *testing.T) {
	t.Helper()
	names, err := exec.Command("podman", "ps", "--all", "--filter", "label="+containerLabel, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Errorf("podman ps: %v", err)
	}
	for _, name := range strings.Fields(string(names)) {
		removeContainer(t, name)
	}
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

// removeContainer stops and removes the test's container name at once, if it exists.
func removeContainer(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("podman", "rm", "--force", "--time", "0", "--ignore", name).CombinedOutput(); err != nil {
		t.Errorf("podman rm %s: %v: %s", name, err, out)
	}
}

// killNamespace kills every process in network namespace ns: whatever a container of the test
// left running there.
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

// setDNS writes each host's /etc/hosts (/etc/netns/<ns>/hosts, which its containers mount
// at /etc/hosts): what the kubelet writes into a pod (localhost and the pod's own
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
	name     string // the container's name in podman: trpdp-<pod hostname>
	hostname string
	mounts   []bindMount
	uid, gid int64
	groups   []int64
	env      []string // the pod template's variables; the image and the runtime add theirs
	dir      string   // working directory; empty is the image's
	argv     []string
}

// command returns the command that runs c on h as the kubelet would: a container of
// troupe-mpi in h's network namespace with h's /etc/hosts, the pod's hostname, the volumes
// mounted at their paths, as the container's user with its groups, in its working directory,
// with the image's environment and the container's variables, running c's command in place of
// the image's entrypoint. The container goes when the command ends or ctx is done.
func (h *host) command(ctx context.Context, c container) *exec.Cmd {
	args := append(append([]string{}, podmanRun...), "--rm", "--name", c.name, "--label", containerLabel,
		"--network", "ns:/run/netns/"+h.netns, "--hostname", c.hostname,
		"--no-hosts", "--volume", filepath.Join("/etc/netns", h.netns, "hosts")+":/etc/hosts:ro",
		"--user", fmt.Sprintf("%d:%d", c.uid, c.gid))
	for _, g := range c.groups {
		args = append(args, "--group-add", strconv.FormatInt(g, 10))
	}
	for _, m := range c.mounts {
		v := m.src + ":" + m.dst
		if m.readOnly {
			v += ":ro"
		}
		args = append(args, "--volume", v)
	}
	for _, e := range c.env {
		args = append(args, "--env", e)
	}
	if c.dir != "" {
		args = append(args, "--workdir", c.dir)
	}
	args = append(append(args, "--entrypoint", c.argv[0], mpiImage), c.argv[1:]...)
	cmd := exec.CommandContext(ctx, "podman", args...)
	// Killing the podman client would leave the container running.
	cmd.Cancel = func() error {
		_ = exec.Command("podman", "rm", "--force", "--time", "0", "--ignore", c.name).Run()
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// process is a long-running container (a worker's sshd).
type process struct {
	name string
	argv []string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start starts c on h; the process is killed when the test ends.
func (h *host) start(t *testing.T, c container) *process {
	t.Helper()
	p := &process{name: c.name, argv: c.argv, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = h.command(context.Background(), c)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v on %s: %v", c.argv, h.netns, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		removeContainer(t, c.name)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			t.Errorf("%v on %s did not end after its container was removed", c.argv, h.netns)
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
	uid, gid int64
}

// ip runs ip(8) with args and fails the test if it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

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
