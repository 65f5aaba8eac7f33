package main

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The least-privilege rules every install of config/ must keep (docs/security.md, "Least
// privilege"). Each returns the violations found, one line each, naming the object and rule.

// namespacedSensitive are namespaced resources no ClusterRole may grant at all: a ClusterRole
// rule on them applies in every namespace, and even resourceNames would match an object of that
// name in any namespace. The operator's Lease and certificate Secret live in a Role of its own
// namespace.
var namespacedSensitive = map[string][]string{
	"":                    {"secrets"},
	"coordination.k8s.io": {"leases"},
}

// clusterSensitive are cluster-scoped resources a ClusterRole may grant only on named objects.
var clusterSensitive = map[string][]string{
	"admissionregistration.k8s.io": {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
}

// clusterSecretsRole and clusterSecretsVerbs are the one exception the cluster-wide install
// needs: the operator creates each job's SSH Secret in the job's namespace, under a name no
// rule can list in advance, and may run jobs in any namespace. So the ClusterRole of the jobs'
// namespaces holds exactly these verbs on secrets alone, and no other ClusterRole may.
const clusterSecretsRole = "troupe-operator"

var clusterSecretsVerbs = []string{"create", "get", "list", "patch", "watch"}

// GuardPolicy is the ValidatingAdmissionPolicy that narrows what the operator's own identity may
// write (config/install/operator-guard.yaml; docs/security.md, "A stolen operator token").
const GuardPolicy = "troupe-operator-guard"

// JobNamespacesPolicy is the ValidatingAdmissionPolicy that refuses a job's creation in a
// namespace not opted in (config/install/job-namespaces.yaml; docs/security.md, "Namespaces
// opted in").
const JobNamespacesPolicy = "troupe-job-namespaces"

// requiredPolicies are the policies every install holds, bound to deny, and what is lost
// without each.
var requiredPolicies = []struct{ name, without string }{
	{GuardPolicy, "RBAC alone lets the operator's token write any Secret, Role or RoleBinding it may create"},
	{JobNamespacesPolicy, "jobs are admitted in namespaces where the guard lets the operator make nothing for them"},
}

// aggregateLabels put a ClusterRole's rules into the built-in admin, edit or view ClusterRole
// (Kubernetes' ClusterRole aggregation), so into every binding of those in the cluster. The
// ClusterRoles that carry one are the users' roles (config/rbac/users).
var aggregateLabels = map[string]string{
	"rbac.authorization.k8s.io/aggregate-to-admin": "admin",
	"rbac.authorization.k8s.io/aggregate-to-edit":  "edit",
	"rbac.authorization.k8s.io/aggregate-to-view":  "view",
}

// userRoleGroup is the only API group a users' role may grant, and userRoleVerbs the verbs it
// may grant on a job; on a job's status only readVerbs (the operator writes it), and a role
// aggregated into view reads only.
const userRoleGroup = "troupe.dev"

var (
	readVerbs     = []string{"get", "list", "watch"}
	userRoleVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)

// Install is one rendered install of config/ and whether it is the cluster-wide one.
type Install struct {
	Name        string
	ClusterWide bool
	Roles       []rbacv1.ClusterRole
	Namespaced  []rbacv1.Role
	// BoundClusterRoles are the ClusterRoles a RoleBinding or ClusterRoleBinding of the install
	// refers to.
	BoundClusterRoles []string
	// Policies are the install's ValidatingAdmissionPolicies, and Denied the policies a binding
	// of the install binds with validationActions Deny.
	Policies, Denied []string
}

// Check returns every violation of the rules in one install:
//   - no wildcard in any Role or ClusterRole;
//   - no ClusterRole rule on leases, nor on secrets but the cluster-wide install's one rule;
//   - ClusterRole rules on webhook configurations name their objects (and so cannot create);
//   - the namespace-scoped install has no ClusterRole rule without resourceNames at all;
//   - both installs hold GuardPolicy and JobNamespacesPolicy, each bound to deny;
//   - a users' role (one aggregated into a built-in role) grants troupe's jobs only, never
//     writes their status, and is bound by nothing of the install (userRoleViolations).
func Check(in Install) []string {
	var bad []string
	for _, p := range requiredPolicies {
		if !slices.Contains(in.Policies, p.name) || !slices.Contains(in.Denied, p.name) {
			bad = append(bad, fmt.Sprintf("%s: no ValidatingAdmissionPolicy %s bound with validationActions Deny: %s", in.Name, p.name, p.without))
		}
	}
	for _, cr := range in.Roles {
		if aggregatedInto(cr) != nil {
			bad = append(bad, userRoleViolations(in, cr)...)
			continue
		}
		for i, r := range cr.Rules {
			where := fmt.Sprintf("%s: ClusterRole %s rule %d (%v %v)", in.Name, cr.Name, i, r.APIGroups, r.Resources)
			bad = append(bad, checkWildcards(where, r)...)
			for _, res := range covered(r, namespacedSensitive) {
				if res == "secrets" && in.ClusterWide && cr.Name == clusterSecretsRole && secretsRuleAllowed(r) {
					continue
				}
				bad = append(bad, fmt.Sprintf("%s: %s in a ClusterRole", where, res))
			}
			if reviewsOrMetrics(r) {
				continue
			}
			named := len(r.ResourceNames) > 0 && !slices.Contains(r.Verbs, "create") && !slices.Contains(r.Verbs, "deletecollection")
			for _, res := range covered(r, clusterSensitive) {
				if !named {
					bad = append(bad, fmt.Sprintf("%s: %s without resourceNames in a ClusterRole", where, res))
				}
			}
			if !in.ClusterWide && !named {
				bad = append(bad, fmt.Sprintf("%s: a namespace-scoped install's ClusterRole rule without resourceNames", where))
			}
		}
	}
	for _, role := range in.Namespaced {
		for i, r := range role.Rules {
			where := fmt.Sprintf("%s: Role %s/%s rule %d (%v %v)", in.Name, role.Namespace, role.Name, i, r.APIGroups, r.Resources)
			bad = append(bad, checkWildcards(where, r)...)
		}
	}
	return bad
}

// aggregatedInto lists the built-in ClusterRoles a ClusterRole's labels aggregate it into.
func aggregatedInto(cr rbacv1.ClusterRole) []string {
	var into []string
	for label, builtin := range aggregateLabels {
		if _, ok := cr.Labels[label]; ok {
			into = append(into, builtin)
		}
	}
	slices.Sort(into)
	return into
}

// userRoleViolations checks a users' role. Aggregation hands its rules to everyone who holds
// the built-in role anywhere, so it must grant troupe's jobs and nothing else (an operator's
// rule here would reach every editor of the cluster); the job's status only to read (the
// operator keeps the record of a job's generated Secrets there); only reading when it is
// aggregated into view. It is for people: no binding of the install may name it.
func userRoleViolations(in Install, cr rbacv1.ClusterRole) []string {
	into := aggregatedInto(cr)
	var bad []string
	if slices.Contains(in.BoundClusterRoles, cr.Name) {
		bad = append(bad, fmt.Sprintf("%s: ClusterRole %s, aggregated into %v, is bound by the install: the users' roles are for people to bind", in.Name, cr.Name, into))
	}
	for i, r := range cr.Rules {
		where := fmt.Sprintf("%s: ClusterRole %s (aggregated into %v) rule %d (%v %v)", in.Name, cr.Name, into, i, r.APIGroups, r.Resources)
		bad = append(bad, checkWildcards(where, r)...)
		if !slices.Equal(r.APIGroups, []string{userRoleGroup}) || len(r.NonResourceURLs) > 0 {
			bad = append(bad, fmt.Sprintf("%s: a users' role grants group %s only", where, userRoleGroup))
		}
		allowed := userRoleVerbs
		if slices.Equal(into, []string{"view"}) {
			allowed = readVerbs
		}
		for _, res := range r.Resources {
			if _, sub, _ := strings.Cut(res, "/"); sub == "status" {
				allowed = readVerbs
			}
		}
		for _, v := range r.Verbs {
			if !slices.Contains(allowed, v) {
				bad = append(bad, fmt.Sprintf("%s: verb %s is not one a users' role may grant here (%v)", where, v, allowed))
			}
		}
	}
	return bad
}

// reviewsOrMetrics: a rule that only creates TokenReviews and SubjectAccessReviews (the metrics
// endpoint's questions to the API server, which read no object), or only gets the non-resource
// URL /metrics (troupe-metrics-reader). Neither can name objects, and neither needs to.
func reviewsOrMetrics(r rbacv1.PolicyRule) bool {
	if len(r.NonResourceURLs) > 0 {
		return len(r.Resources) == 0 && slices.Equal(r.NonResourceURLs, []string{"/metrics"}) && slices.Equal(r.Verbs, []string{"get"})
	}
	reviews := map[string]string{"tokenreviews": "authentication.k8s.io", "subjectaccessreviews": "authorization.k8s.io"}
	if !slices.Equal(r.Verbs, []string{"create"}) || len(r.Resources) == 0 {
		return false
	}
	for _, res := range r.Resources {
		if group, ok := reviews[res]; !ok || !slices.Equal(r.APIGroups, []string{group}) {
			return false
		}
	}
	return true
}

// secretsRuleAllowed: the cluster-wide secrets rule grants exactly clusterSecretsVerbs on
// secrets alone (no other resource rides along on it).
func secretsRuleAllowed(r rbacv1.PolicyRule) bool {
	verbs := slices.Clone(r.Verbs)
	slices.Sort(verbs)
	return slices.Equal(r.APIGroups, []string{""}) && slices.Equal(r.Resources, []string{"secrets"}) &&
		slices.Equal(verbs, clusterSecretsVerbs)
}

// covered lists the resources of set that a rule covers; a wildcard covers all of its groups'.
func covered(r rbacv1.PolicyRule, set map[string][]string) []string {
	var found []string
	for group, resources := range set {
		if !slices.Contains(r.APIGroups, group) && !slices.Contains(r.APIGroups, rbacv1.APIGroupAll) {
			continue
		}
		for _, res := range resources {
			if slices.Contains(r.Resources, res) || slices.Contains(r.Resources, rbacv1.ResourceAll) {
				found = append(found, res)
			}
		}
	}
	slices.Sort(found)
	return found
}

// checkWildcards refuses "*" in any rule: every grant is spelled out.
func checkWildcards(where string, r rbacv1.PolicyRule) []string {
	var bad []string
	for field, values := range map[string][]string{"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs} {
		if slices.Contains(values, "*") {
			bad = append(bad, fmt.Sprintf("%s: wildcard in %s", where, field))
		}
	}
	slices.Sort(bad)
	return bad
}
