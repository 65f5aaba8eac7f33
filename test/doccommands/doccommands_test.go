package doccommands

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEveryDocCommandIsTested: every install, upgrade and uninstall command of the docs
// belongs to a flow a real-node test runs, and every such flow has a command in the docs.
func TestEveryDocCommandIsTested(t *testing.T) {
	cmds, err := Extract("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 20 {
		t.Fatalf("found only %d commands in the docs: the extraction is broken", len(cmds))
	}
	for _, c := range cmds {
		if len(Classify(c.Text)) == 0 {
			t.Errorf("%s:%d: %q is run by no real-node test: write it as a tested command, or add its flow to test/doccommands and to the test that runs it", c.File, c.Line, c.Text)
		}
	}
	for _, f := range Flows() {
		got, err := Of(cmds, f)
		if err != nil {
			t.Error(err)
			continue
		}
		var lines []string
		for _, c := range got {
			lines = append(lines, c.String())
		}
		t.Logf("%s:\n  %s", f, strings.Join(lines, "\n  "))
	}
}

func TestExtract(t *testing.T) {
	doc := strings.Join([]string{
		"Install with `kubectl apply --server-side -k config/`; upgrades: `helm upgrade` and `kubectl", // 1
		"apply --server-side -f deploy/`.", // 2
		"",                                 // 3
		"```sh",                            // 4
		"# a comment line",                 // 5
		"kubectl create -f deploy/          # the rendered install", // 6
		"helm install troupe troupe-X.Y.Z.tgz -n troupe-system \\",  // 7
		"  --set image.repository=REGISTRY/troupe-operator",         // 8
		"kubectl create -f examples/mpijob.yaml",                    // 9
		"```",                                                       // 10
		"| a | `kubectl delete -f troupe.yaml` |",                   // 11
		"`kubectl create namespace sw-mpi-operator` and `kubectl delete namespace troupe-jobs`", // 12
	}, "\n")
	var got []Command
	for _, c := range fromMarkdown(doc) {
		if IsInstallCommand(c.Text) {
			got = append(got, c)
		}
	}
	want := []Command{
		{Line: 1, Text: "kubectl apply --server-side -k config/"},
		{Line: 1, Text: "kubectl apply --server-side -f deploy/"},
		{Line: 6, Text: "kubectl create -f deploy/"},
		{Line: 7, Text: "helm install troupe troupe-X.Y.Z.tgz -n troupe-system --set image.repository=REGISTRY/troupe-operator"},
		{Line: 11, Text: "kubectl delete -f troupe.yaml"},
		{Line: 12, Text: "kubectl delete namespace troupe-jobs"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestSubstitute(t *testing.T) {
	v := Values{Version: "v0.2.0-realnode", Registry: "ghcr.io/troupe-dev"}
	for in, want := range map[string]string{
		"helm install troupe troupe-X.Y.Z.tgz -n troupe-system --set image.repository=REGISTRY/troupe-operator --set agentImage=REGISTRY/troupe-agent:vX.Y.Z": "helm install troupe troupe-0.2.0-realnode.tgz -n troupe-system --set image.repository=ghcr.io/troupe-dev/troupe-operator --set agentImage=ghcr.io/troupe-dev/troupe-agent:v0.2.0-realnode",
		"helm upgrade troupe troupe-0.2.0.tgz -n troupe-system": "helm upgrade troupe troupe-0.2.0-realnode.tgz -n troupe-system",
		"kubectl apply --server-side -f troupe.yaml":            "kubectl apply --server-side -f troupe.yaml",
	} {
		if got := Substitute(in, v); got != want {
			t.Errorf("Substitute(%q) = %q, want %q", in, got, want)
		}
	}
}
