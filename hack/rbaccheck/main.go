// Command rbaccheck renders the installs of config/ with kustomize and fails when their RBAC
// breaks the least-privilege rules of docs/security.md (rules.go). `make verify` runs it.
//
//	go run ./hack/rbaccheck config
//
// checks config/ (the cluster-wide install) and config/namespaced (the namespace-scoped one).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rbaccheck <config dir>")
		os.Exit(2)
	}
	dir := os.Args[1]
	var bad []string
	for _, in := range []struct {
		dir         string
		clusterWide bool
	}{{dir, true}, {filepath.Join(dir, "namespaced"), false}} {
		install, err := Render(in.dir, in.clusterWide)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rbaccheck:", err)
			os.Exit(1)
		}
		bad = append(bad, Check(install)...)
	}
	for _, b := range bad {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "rbaccheck: %d RBAC rules break docs/security.md's least-privilege rules\n", len(bad))
		os.Exit(1)
	}
}

// Render builds the kustomization in dir as `kubectl kustomize` does and returns its Roles,
// ClusterRoles and the ClusterRoles its bindings refer to.
func Render(dir string, clusterWide bool) (Install, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return Install{}, fmt.Errorf("render %s: %w", dir, err)
	}
	in := Install{Name: dir, ClusterWide: clusterWide}
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return Install{}, fmt.Errorf("%s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		switch r.GetKind() {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cr); err != nil {
				return Install{}, fmt.Errorf("%s: ClusterRole %s: %w", dir, r.GetName(), err)
			}
			in.Roles = append(in.Roles, cr)
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding // a ClusterRoleBinding has the same roleRef and subjects
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &b); err != nil {
				return Install{}, fmt.Errorf("%s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
			}
			if b.RoleRef.Kind == "ClusterRole" {
				in.BoundClusterRoles = append(in.BoundClusterRoles, b.RoleRef.Name)
			}
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &b); err != nil {
				return Install{}, fmt.Errorf("%s: ValidatingAdmissionPolicyBinding %s: %w", dir, r.GetName(), err)
			}
			if slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
				in.Denied = append(in.Denied, b.Spec.PolicyName)
			}
		case "ValidatingAdmissionPolicy":
			in.Policies = append(in.Policies, r.GetName())
		case "Role":
			var role rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &role); err != nil {
				return Install{}, fmt.Errorf("%s: Role %s: %w", dir, r.GetName(), err)
			}
			in.Namespaced = append(in.Namespaced, role)
		}
	}
	if len(in.Roles)+len(in.Namespaced) == 0 {
		return Install{}, fmt.Errorf("%s renders no Role or ClusterRole", dir)
	}
	return in, nil
}
