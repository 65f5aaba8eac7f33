package doccommands

import (
	"os"
	"path/filepath"
	"regexp"
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
		"`kubectl create namespace sw-mpi-operator` and `kubectl delete namespace troupe-jobs`",       // 12
		"`kubectl label namespace team-a troupe.dev/jobs=enabled`, every one: `" + OptInCommand + "`", // 13
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
		{Line: 13, Text: OptInCommand},
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

// TestEveryFlowIsRun: every flow of the rules is asked for by a real-node test (a call of
// docs, runDocs or uninstallWithDocs in test/realnode naming its form and step), so that a
// command classified into a flow is one a test runs.
func TestEveryFlowIsRun(t *testing.T) {
	forms := map[string]Form{}
	for _, f := range []Form{Kustomize, Deploy, Helm, Namespaced, PreviousKustomize, Release, ReleaseNamespaced, ReleaseHelm} {
		forms[formName(f)] = f
	}
	steps := map[string]Step{"PrepareNamespace": PrepareNamespace, "Install": Install, "OptIn": OptIn, "UpgradeCRDs": UpgradeCRDs, "Upgrade": Upgrade, "Uninstall": Uninstall}
	files, err := filepath.Glob("../realnode/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the real-node tests: %v", err)
	}
	run := map[Flow]bool{}
	call := regexp.MustCompile(`(?:docs|runDocs)\(t, (?:[\w.]+, )?doccommands\.(\w+), doccommands\.(\w+)|uninstallWithDocs\(t, [\w.]+, doccommands\.(\w+)`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if m[3] != "" {
				run[Flow{forms[m[3]], Uninstall}] = true
			} else {
				run[Flow{forms[m[1]], steps[m[2]]}] = true
			}
		}
	}
	for _, f := range Flows() {
		if !run[f] {
			t.Errorf("no real-node test runs the docs' commands of %s", f)
		}
	}
}

// formName is the Go name of a form's constant.
func formName(f Form) string {
	return map[Form]string{Kustomize: "Kustomize", Deploy: "Deploy", Helm: "Helm", Namespaced: "Namespaced",
		PreviousKustomize: "PreviousKustomize", Release: "Release", ReleaseNamespaced: "ReleaseNamespaced", ReleaseHelm: "ReleaseHelm"}[f]
}
