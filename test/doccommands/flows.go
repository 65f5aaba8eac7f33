package doccommands

import (
	"fmt"
	"regexp"
	"strings"
)

// Form is a way of installing troupe.
type Form string

const (
	// From a checkout.
	Kustomize  Form = "kustomize config/"
	Deploy     Form = "deploy/"
	Helm       Form = "Helm charts/troupe"
	Namespaced Form = "kustomize config/namespaced/"
	// The previous release's kustomize install (its deploy/), which CHANGELOG names; its chart
	// is installed with Helm's commands.
	PreviousKustomize Form = "previous release's kustomize deploy/"
	// From a release's files.
	Release           Form = "release troupe.yaml"
	ReleaseNamespaced Form = "release troupe-namespaced.yaml"
	ReleaseHelm       Form = "release Helm troupe-X.Y.Z.tgz"
)

// Step is a step of a form's life. A step's commands run in the order of the rules below,
// except where a form's test says they are alternatives (deploy/'s two installs, the release
// chart's two).
type Step string

const (
	PrepareNamespace Step = "prepare namespace"
	Install          Step = "install"
	// OptIn labels every namespace that holds troupe jobs troupe.dev/jobs=enabled: before an
	// upgrade from a release without the namespace opt-in (CHANGELOG's upgrade notes).
	OptIn       Step = "opt in the jobs' namespaces"
	UpgradeCRDs Step = "upgrade CRDs"
	Upgrade     Step = "upgrade"
	Uninstall   Step = "uninstall"
)

// Flow is a step of a form.
type Flow struct {
	Form Form
	Step Step
}

func (f Flow) String() string { return string(f.Form) + ": " + string(f.Step) }

// rule classifies the commands whose text matches: each belongs to every flow listed.
type rule struct {
	text  *regexp.Regexp
	flows []Flow
}

// flows of several forms at one step.
func at(step Step, forms ...Form) []Flow {
	var fl []Flow
	for _, f := range forms {
		fl = append(fl, Flow{f, step})
	}
	return fl
}

// rules is every command of the docs that a real-node test runs, with the flows it belongs
// to. Each flow is run by the test named beside it: a command of the docs that matches no rule
// is one no test runs (TestEveryDocCommandIsTested).
var rules = []rule{
	// TestInstall: the checkout's installs.
	{exact("kubectl apply --server-side -k config/"), append(at(Install, Kustomize), at(Upgrade, Kustomize)...)},
	{exact("kubectl delete --ignore-not-found -k config/"), at(Uninstall, Kustomize)},
	{exact("kubectl create -f deploy/"), at(Install, Deploy)},
	// TestInstall, and TestUpgradeUnderRunningJobs's kubectl case.
	{exact("kubectl apply --server-side -f deploy/"), append(at(Install, Deploy), at(Upgrade, Deploy)...)},
	{exact("kubectl delete --ignore-not-found -f deploy/"), at(Uninstall, Deploy)},
	{exact("kubectl create namespace troupe-system"), at(PrepareNamespace, Helm, ReleaseHelm)},
	{exact("kubectl label namespace troupe-system pod-security.kubernetes.io/enforce=restricted"), at(PrepareNamespace, Helm, ReleaseHelm)},
	{exact("helm install troupe charts/troupe -n troupe-system"), at(Install, Helm)},
	// TestUpgradeUnderRunningJobs's Helm case.
	{exact("kubectl apply --server-side --force-conflicts -f charts/troupe/crds/"), at(UpgradeCRDs, Helm)},
	{exact("helm upgrade troupe charts/troupe -n troupe-system"), at(Upgrade, Helm)},
	{exact("helm uninstall troupe -n troupe-system"), at(Uninstall, Helm, ReleaseHelm)},
	{exact("kubectl delete -f charts/troupe/crds/"), at(Uninstall, Helm)},
	{exact("kubectl delete namespace troupe-system"), at(Uninstall, Helm, ReleaseHelm)},
	{exact("kubectl create namespace troupe-jobs"), at(PrepareNamespace, Namespaced, ReleaseNamespaced)},
	{exact("kubectl label namespace troupe-jobs troupe.dev/jobs=enabled"), at(PrepareNamespace, Namespaced, ReleaseNamespaced)},
	// TestUpgradeUnderRunningJobs, before each upgrade from the previous release.
	{exact(OptInCommand), at(OptIn, Kustomize, Helm)},
	{exact("kubectl apply --server-side -f config/crds/"), at(Install, Namespaced)},
	{exact("kubectl apply --server-side -k config/namespaced/"), at(Install, Namespaced)},
	{exact("kubectl delete -k config/namespaced/"), at(Uninstall, Namespaced)},
	{exact("kubectl delete -f config/crds/"), at(Uninstall, Namespaced)},

	// TestUpgradeUnderRunningJobs: the previous release's kustomize install, in its checkout.
	{exact("kubectl apply --server-side -k deploy/"), at(Install, PreviousKustomize)},

	// TestInstallFromRelease: a release's installs, from its files alone.
	{exact("kubectl apply --server-side --force-conflicts -f troupe-crds.yaml"), at(UpgradeCRDs, Release, ReleaseHelm)},
	{exact("kubectl apply --server-side -f troupe.yaml"), append(at(Install, Release), at(Upgrade, Release)...)},
	{exact("kubectl delete --ignore-not-found -f troupe.yaml"), at(Uninstall, Release)},
	{exact("kubectl apply --server-side -f troupe-crds.yaml"), at(Install, ReleaseNamespaced)},
	{exact("kubectl apply --server-side -f troupe-namespaced.yaml"), at(Install, ReleaseNamespaced)},
	{exact("kubectl delete -f troupe-namespaced.yaml"), at(Uninstall, ReleaseNamespaced)},
	{exact("kubectl delete -f troupe-crds.yaml"), at(Uninstall, ReleaseNamespaced)},
	// After both installs' deletes (a flow runs its commands in this table's order): deleted
	// first, the namespace takes the operator's Role and RoleBinding with it, and the delete of
	// the install's file fails on them (NotFound).
	{exact("kubectl delete namespace troupe-jobs"), at(Uninstall, Namespaced, ReleaseNamespaced)},
	{regexp.MustCompile(`^helm install troupe troupe-X\.Y\.Z\.tgz -n troupe-system( --set image\.repository=REGISTRY/troupe-operator --set agentImage=REGISTRY/troupe-agent:vX\.Y\.Z)?$`), at(Install, ReleaseHelm)},
	{regexp.MustCompile(`^helm upgrade troupe troupe-(X\.Y\.Z|\d+\.\d+\.\d+)\.tgz -n troupe-system$`), at(Upgrade, ReleaseHelm)},
	// Every kind's CRD, as the docs name them (TestEveryKindIsEverywhere holds the list to the
	// registry).
	{regexp.MustCompile(`^kubectl delete crd( [a-z]+\.troupe\.dev)+$`), at(Uninstall, ReleaseHelm)},
}

// OptInCommand labels every namespace that holds a troupe job (of any kind: the category
// troupe) troupe.dev/jobs=enabled, as the docs write it.
const OptInCommand = "kubectl get troupe -A --no-headers -o custom-columns=NS:.metadata.namespace | sort -u | " +
	"xargs -r -I {} kubectl label namespace {} troupe.dev/jobs=enabled --overwrite"

func exact(s string) *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(s) + "$") }

// Classify returns the flows a command belongs to; none if no real-node test runs it.
func Classify(text string) []Flow {
	for _, r := range rules {
		if r.text.MatchString(text) {
			return r.flows
		}
	}
	return nil
}

// Flows is every flow of the rules, in their order.
func Flows() []Flow {
	var all []Flow
	seen := map[Flow]bool{}
	for _, r := range rules {
		for _, f := range r.flows {
			if !seen[f] {
				seen[f] = true
				all = append(all, f)
			}
		}
	}
	return all
}

// Of returns the distinct command texts of the docs (cmds, from Extract) that belong to the
// flow, in the order of the rules, each with the places the docs write it. A flow the docs
// no longer write is an error: its test would otherwise run nothing.
func Of(cmds []Command, flow Flow) ([]Command, error) {
	var out []Command
	for _, r := range rules {
		if !contains(r.flows, flow) {
			continue
		}
		seen := map[string]bool{}
		for _, c := range cmds {
			if !r.text.MatchString(c.Text) {
				continue
			}
			if seen[c.Text] {
				continue // reported once, at the first place the docs write it
			}
			seen[c.Text] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the docs write no command of %s", flow)
	}
	return out, nil
}

func contains(flows []Flow, f Flow) bool {
	for _, g := range flows {
		if g == f {
			return true
		}
	}
	return false
}

// Values are what the tests put in place of the docs' placeholders.
type Values struct {
	Version  string // a release's version, vX.Y.Z: its files' names and image tags
	Registry string // where the release's images are: REGISTRY
}

// Substitute replaces the docs' placeholders in a command by real values. The placeholders:
//
//	troupe-X.Y.Z.tgz, troupe-0.2.0.tgz  the release's chart (CHANGELOG names its own release)
//	vX.Y.Z                              the release's version
//	REGISTRY                            the registry holding the release's images
func Substitute(text string, v Values) string {
	text = chartArchive.ReplaceAllString(text, "troupe-"+strings.TrimPrefix(v.Version, "v")+".tgz")
	text = strings.ReplaceAll(text, "vX.Y.Z", v.Version)
	return strings.ReplaceAll(text, "REGISTRY", v.Registry)
}

var chartArchive = regexp.MustCompile(`troupe-(X\.Y\.Z|\d+\.\d+\.\d+)\.tgz`)
