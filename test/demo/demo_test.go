// Package demo runs `make demo` (hack/demo.sh) as a newcomer does, twice at once on one
// machine: two clusters (CLUSTER_NAME), each with its own operator process, the first with the
// ChainerMN example and the second with the MPIJob example (`make demo
// EXAMPLE=examples/mpijob.yaml`, as the README offers).
package demo

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var repoRoot = filepath.Join("..", "..")

// Two demos side by side: the second, started while the first one's operator still runs, gets
// ports of its own, and both operators stay ready. (The operator's ports used to be fixed: the
// second demo's operator could not bind them and the demo failed, "operator not ready".)
func TestTwoDemosSideBySide(t *testing.T) {
	demos := []struct {
		name, example string
		// succeeded is the example's line of `kubectl get <kind>` once it ran.
		succeeded *regexp.Regexp
	}{
		{"trp-demo-a", "", regexp.MustCompile(`(?m)^example-job-mn +Succeeded +[0-9]+/2 `)},
		{"trp-demo-b", "examples/mpijob.yaml", regexp.MustCompile(`(?m)^mpi-example +Succeeded +[0-9]+/5 `)},
	}
	var names []string
	ports := map[string]map[string]string{}
	for _, d := range demos {
		name := d.name
		names = append(names, name)
		t.Cleanup(func() {
			if out, err := run("hack/demo-down.sh", name, ""); err != nil {
				t.Errorf("demo-down %s: %v\n%s", name, err, out)
			}
		})
		out, err := run("hack/demo.sh", name, d.example)
		if err != nil {
			t.Fatalf("make demo with CLUSTER_NAME=%s EXAMPLE=%s: %v\n%s", name, d.example, err, out)
		}
		if !strings.Contains(out, "Demo finished") {
			t.Fatalf("make demo with CLUSTER_NAME=%s EXAMPLE=%s did not finish:\n%s", name, d.example, out)
		}
		if !d.succeeded.MatchString(out) {
			t.Errorf("make demo with CLUSTER_NAME=%s EXAMPLE=%s: no line matching %q in its kubectl get:\n%s", name, d.example, d.succeeded, out)
		}
		ports[name] = demoPorts(t, name)
	}
	seen := map[string]string{}
	for _, name := range names {
		for key, port := range ports[name] {
			if other, ok := seen[port]; ok {
				t.Errorf("demo %s's %s is port %s, which %s has too", name, key, port, other)
			}
			seen[port] = name + "'s " + key
		}
		// Both operators still run and are ready, the first one after the second started.
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%s/readyz", ports[name]["HEALTH_PORT"]))
		if err != nil {
			t.Errorf("demo %s's operator: %v", name, err)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("demo %s's operator /readyz: %s", name, resp.Status)
		}
	}
}

// run runs a script of the repository for the demo cluster name and example (empty: the
// script's default) and returns its output.
func run(script, name, example string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, script))
	cmd.Env = append(os.Environ(), "CLUSTER_NAME="+name, "EXAMPLE="+example)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// demoPorts reads the ports file demo.sh writes in the demo's directory.
func demoPorts(t *testing.T, name string) map[string]string {
	t.Helper()
	cache := os.Getenv("TROUPE_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache", "troupe")
	}
	b, err := os.ReadFile(filepath.Join(cache, "demo", name, "ports"))
	if err != nil {
		t.Fatalf("the demo's ports: %v", err)
	}
	ports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		ports[k] = v
	}
	for _, k := range []string{"METRICS_PORT", "HEALTH_PORT", "WEBHOOK_PORT"} {
		if ports[k] == "" {
			t.Fatalf("demo %s's ports file has no %s: %q", name, k, b)
		}
	}
	return ports
}
