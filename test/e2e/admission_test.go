package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// On the local cluster the operator's own webhooks, with the certificate it made itself, refuse
// a bad spec at `kubectl create`, and kubectl prints the field and the reason.
func TestKubectlCreateOfABadSpec(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for file, want := range map[string]string{
		"chainer-gpu-fraction.yaml": "spec.workerSets[ws0].template.spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"500m\": nvidia.com/gpu is an extended resource: must be a whole number",
		"mpi-nothing-to-run.yaml":   "spec.worker.cmd: Required value: nothing to run",
		// kubectl validates strictly: the field it does not know is named, not pruned.
		"pytorchjob-lowercase-replica-keys.yaml": `unknown field "spec.pytorchReplicaSpecs.master"`,
	} {
		out, err := kubectl("create", "-n", ns, "-f", filepath.Join(repoRoot, "test", "testdata", "admission", "bad", file))
		if err == nil {
			t.Errorf("kubectl create -f %s succeeded:\n%s", file, out)
			continue
		}
		if !strings.Contains(out, want) {
			t.Errorf("kubectl create -f %s printed:\n%s\nwant it to contain:\n%s", file, out, want)
		}
	}
}
