package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The operator's ClusterRole as v0.1.0 shipped it breaks the rules on all three counts the
// issue names: leases, secrets and webhook configurations, cluster-wide, unnamed.
func TestCheckRefusesTheV010ClusterRole(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "clusterrole-v0.1.0.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &cr); err != nil {
		t.Fatal(err)
	}
	bad := strings.Join(Check(Install{Name: "v0.1.0", ClusterWide: true, Roles: []rbacv1.ClusterRole{cr}}), "\n")
	for _, want := range []string{
		"leases in a ClusterRole",
		"secrets in a ClusterRole",
		"mutatingwebhookconfigurations without resourceNames",
		"validatingwebhookconfigurations without resourceNames",
	} {
		if !strings.Contains(bad, want) {
			t.Errorf("Check did not report %q; it reported:\n%s", want, bad)
		}
	}
}

func TestCheckRules(t *testing.T) {
	secrets := func(verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: verbs}
	}
	webhooks := rbacv1.PolicyRule{
		APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"},
		ResourceNames: []string{"troupe-validating-webhook-configuration"}, Verbs: []string{"get", "list", "watch", "update"},
	}
	cases := []struct {
		name        string
		clusterWide bool
		role        string
		rule        rbacv1.PolicyRule
		want        string // a part of a violation expected; "" for none
	}{
		{"the cluster-wide secrets rule", true, "troupe-operator", secrets("create", "get", "list", "patch", "watch"), ""},
		{"secrets rule with delete", true, "troupe-operator", secrets("create", "delete", "get", "list", "patch", "watch"), "secrets in a ClusterRole"},
		{"secrets rule in another ClusterRole", true, "troupe-operator-system", secrets("create", "get", "list", "patch", "watch"), "secrets in a ClusterRole"},
		{"secrets rule in a namespace-scoped install", false, "troupe-operator", secrets("create", "get", "list", "patch", "watch"), "secrets in a ClusterRole"},
		{"secrets by name are still in every namespace", true, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cert"}, Verbs: []string{"get"}}, "secrets in a ClusterRole"},
		{"webhook configurations by name", false, "troupe-operator-system", webhooks, ""},
		{"webhook configurations by name cannot create", true, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: webhooks.APIGroups, Resources: webhooks.Resources, ResourceNames: webhooks.ResourceNames, Verbs: []string{"create"}},
			"validatingwebhookconfigurations without resourceNames"},
		{"wildcard resource", true, "troupe-operator",
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"get"}}, "wildcard in resources"},
		{"wildcard group covers leases", true, "troupe-operator",
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"leases"}, Verbs: []string{"get"}}, "leases in a ClusterRole"},
		{"token and access reviews in a namespace-scoped install", false, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}, ""},
		{"reading /metrics in a namespace-scoped install", false, "troupe-metrics-reader",
			rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}, ""},
		{"reviews may not be read", false, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create", "list"}},
			"namespace-scoped install's ClusterRole rule without resourceNames"},
		{"a review rule does not carry other resources", false, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews", "tokenrequests"}, Verbs: []string{"create"}},
			"namespace-scoped install's ClusterRole rule without resourceNames"},
		{"unnamed rule in a namespace-scoped install", false, "troupe-operator-system",
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get"}}, "namespace-scoped install's ClusterRole rule without resourceNames"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cr := rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{tc.rule}}
			cr.Name = tc.role
			bad := Check(Install{Name: "test", ClusterWide: tc.clusterWide, Roles: []rbacv1.ClusterRole{cr}, Guard: true, GuardBound: true})
			switch {
			case tc.want == "" && len(bad) > 0:
				t.Errorf("unexpected violations: %q", bad)
			case tc.want != "" && !strings.Contains(strings.Join(bad, "\n"), tc.want):
				t.Errorf("violations %q, want one containing %q", bad, tc.want)
			}
		})
	}
}

// An install without the guard policy, or with the policy but no denying binding, is refused.
func TestCheckWantsTheGuard(t *testing.T) {
	for _, in := range []Install{{Name: "none"}, {Name: "unbound", Guard: true}, {Name: "binding only", GuardBound: true}} {
		if bad := strings.Join(Check(in), "\n"); !strings.Contains(bad, "no ValidatingAdmissionPolicy "+GuardPolicy) {
			t.Errorf("%s: violations %q, want the missing guard", in.Name, bad)
		}
	}
}

// Both installs of config/ render and keep the rules (what make verify runs).
func TestConfigKeepsTheRules(t *testing.T) {
	for _, in := range []struct {
		dir         string
		clusterWide bool
	}{{"../../config", true}, {"../../config/namespaced", false}} {
		install, err := Render(in.dir, in.clusterWide)
		if err != nil {
			t.Fatal(err)
		}
		if bad := Check(install); len(bad) > 0 {
			t.Errorf("%s:\n%s", in.dir, strings.Join(bad, "\n"))
		}
		if !in.clusterWide {
			for _, cr := range install.Roles {
				if cr.Name == clusterSecretsRole {
					t.Errorf("%s: the namespace-scoped install keeps ClusterRole %s", in.dir, cr.Name)
				}
			}
		}
	}
}
