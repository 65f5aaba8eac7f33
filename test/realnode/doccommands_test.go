package realnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/troupe-dev/troupe/test/doccommands"
)

// docCommands are the install, upgrade and uninstall commands of the docs (test/doccommands),
// which the install and upgrade tests run as the docs write them.
var docCommands = sync.OnceValues(func() ([]doccommands.Command, error) { return doccommands.Extract(repoRoot) })

// docs returns the docs' commands of a form's step, placeholders replaced by v, each once.
func docs(t *testing.T, form doccommands.Form, step doccommands.Step, v doccommands.Values) []doccommands.Command {
	t.Helper()
	all, err := docCommands()
	if err != nil {
		t.Fatalf("read the docs' commands: %v", err)
	}
	cmds, err := doccommands.Of(all, doccommands.Flow{Form: form, Step: step})
	if err != nil {
		t.Fatal(err)
	}
	var out []doccommands.Command
	seen := map[string]bool{}
	for _, c := range cmds {
		c.Text = doccommands.Substitute(c.Text, v)
		if !seen[c.Text] {
			seen[c.Text] = true
			out = append(out, c)
		}
	}
	return out
}

// runDoc runs a command of the docs as written, with sh in dir (the checkout, or a directory
// of a release's files), against the cluster: KUBECONFIG names it, kubectl is the cluster's
// and helm is $HELM. It returns the command's output.
func runDoc(t *testing.T, dir string, c doccommands.Command) string {
	t.Helper()
	bin := t.TempDir()
	if helm := os.Getenv("HELM"); helm != "" {
		if err := os.Symlink(helm, filepath.Join(bin, "helm")); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", c.Text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' command failed: %s\n(run in %s): %v\n%s", c, dir, err, out)
	}
	t.Logf("$ %s   # %s:%d, %v", c.Text, c.File, c.Line, time.Since(start).Round(time.Second))
	return string(out)
}

// runDocs runs every command of the docs for a form's step, in the docs' order, in dir.
func runDocs(t *testing.T, dir string, form doccommands.Form, step doccommands.Step, v doccommands.Values) {
	t.Helper()
	for _, c := range docs(t, form, step, v) {
		runDoc(t, dir, c)
	}
}

// uninstallWithDocs runs the docs' uninstall of a form in dir, then waits until nothing of
// troupe is left in the cluster (troupeLeft), so that the next install starts from a cluster
// without troupe.
func uninstallWithDocs(t *testing.T, dir string, form doccommands.Form, v doccommands.Values) {
	t.Helper()
	runDocs(t, dir, form, doccommands.Uninstall, v)
	start := time.Now()
	var left string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		left = troupeLeft(t)
		return left == "", nil
	})
	if err != nil {
		t.Errorf("after the docs' uninstall of %s, this is left of troupe:\n%s", form, left)
		return
	}
	t.Logf("nothing of troupe left %v after the uninstall of %s", time.Since(start).Round(time.Second), form)
}

// troupeClusterObjects are the kinds of cluster-wide object an install of troupe makes.
const troupeClusterObjects = "customresourcedefinitions,clusterroles,clusterrolebindings,validatingwebhookconfigurations," +
	"mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,namespaces"

// troupeLeft lists the cluster-wide objects of troupe (named troupe-..., or of the group
// troupe.dev) and troupe's namespaces that exist, one a line; "" when there are none.
func troupeLeft(t *testing.T) string {
	t.Helper()
	out := mustKubectl(t, "", "get", troupeClusterObjects, "-o", "name")
	var left []string
	for _, l := range strings.Fields(out) {
		_, name, _ := strings.Cut(l, "/")
		if strings.HasPrefix(name, "troupe-") || strings.HasSuffix(name, ".troupe.dev") {
			left = append(left, l)
		}
	}
	return strings.Join(left, "\n")
}
