package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The users' roles as the installs ship them (config/rbac/users, which config/ and
// config/namespaced both compose, the chart and deploy/troupe.yaml render), aggregated into
// Kubernetes' built-in view and edit, with users bound to those built-in roles in one
// namespace by a RoleBinding, as a cluster admin binds them:
//   - a viewer runs describe and get (through the plugin's --as) and reads the job's story;
//     the Secrets it may not list take one line, and it exits 0; suspend is refused naming
//     the permission it lacks; it cannot create a job;
//   - an editor creates a job, scales it through its scale subresource, suspends it with the
//     plugin and deletes it, but cannot write the status the operator keeps.
//
// envtest runs no kube-controller-manager, whose ClusterRole aggregation controller fills the
// built-in roles' rules (in envtest they start empty): the test plays that controller
// (aggregateBuiltinRoles), with the selectors the API server bootstrapped the built-in roles
// with, as the suite plays the Job and StatefulSet controllers.
func TestUserRoles(t *testing.T) {
	ctx := context.Background()
	applyUserRoles(t)
	aggregateBuiltinRoles(t)

	ns := newNamespace(t)
	for user, role := range map[string]string{"viewer": "view", "editor": "edit"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if err := k8s.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	job := runningMPIJob(t, ns)

	t.Run("view", func(t *testing.T) {
		// The authorizer learns of bindings and roles through its informers: wait for the first
		// answer that is not a refusal of the job itself.
		var r result
		eventually(t, "describe as viewer reads the job", func(context.Context) (bool, error) {
			r = troupe(t, "describe", "-n", ns, "mpijob/"+job.Name, "--as", "viewer")
			if r.err != nil {
				return false, fmt.Errorf("%w: %s", r.err, r.stderr)
			}
			return true, nil
		})
		for _, want := range []string{
			"Name:          " + job.Name,
			"Phase:         Running",
			"StatefulSet   " + job.Name + "-worker",
			"ConfigMap     " + job.Name + "-mpi",
			job.Name + "-worker-4",
			`Secrets: not shown (forbidden: User "viewer" cannot list resource "secrets" in API group "" in the namespace "` + ns + `")`,
			"Events:",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("describe as viewer does not show %q:\n%s", want, r.stdout)
			}
		}
		secretRow := regexp.MustCompile(`(?m)^  Secret +` + job.Name + `-ssh`)
		if secretRow.MatchString(r.stdout) || strings.Contains(r.stdout, "Events:  not shown") {
			t.Errorf("describe as viewer shows what it may not, or hides what it may:\n%s", r.stdout)
		}
		if r.stderr != "" {
			t.Errorf("describe as viewer wrote to stderr: %s", r.stderr)
		}

		rows := tableRows(t, mustTroupe(t, "get", "-n", ns, "--as", "viewer"))
		if len(rows) != 1 || rows[0]["NAME"] != job.Name || rows[0]["KIND"] != "MPIJob" || rows[0]["PHASE"] != "Running" {
			t.Errorf("get as viewer: %v, want the one MPIJob %s, Running", rows, job.Name)
		}
		if out := mustTroupe(t, "hostfile", "-n", ns, "mpijob/"+job.Name, "--as", "viewer"); !strings.Contains(out, job.Name+"-worker-0.") {
			t.Errorf("hostfile as viewer:\n%s", out)
		}

		r = troupe(t, "suspend", "-n", ns, "mpijob/"+job.Name, "--as", "viewer")
		if r.err == nil || !strings.Contains(r.stderr, "you may not patch mpijobs.troupe.dev in namespace "+`"`+ns+`"`) ||
			!strings.Contains(r.stderr, "edit") {
			t.Errorf("suspend as viewer: %v, stderr %q; want a refusal naming patch on mpijobs.troupe.dev and the edit role", r.err, r.stderr)
		}

		viewer := impersonate(t, "viewer")
		_, obj := loadExample(t, filepath.Join(repoRoot, "examples", "mpijob.yaml"))
		obj.SetNamespace(ns)
		obj.SetName("by-viewer")
		if err := viewer.Create(ctx, obj); !apierrors.IsForbidden(err) {
			t.Errorf("viewer created an MPIJob: %v, want Forbidden", err)
		}
	})

	t.Run("edit", func(t *testing.T) {
		editor := impersonate(t, "editor")
		_, obj := loadExample(t, filepath.Join(repoRoot, "examples", "mpijob.yaml"))
		mine := obj.(*troupev1.MPIJob)
		mine.Namespace, mine.Name = ns, "by-editor"
		eventually(t, "editor creates an MPIJob", func(ctx context.Context) (bool, error) {
			err := editor.Create(ctx, mine)
			return err == nil, err
		})

		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: mine.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
		if err := editor.SubResource("scale").Update(ctx, mine, client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("editor scales its MPIJob: %v", err)
		}
		var got troupev1.MPIJob
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(mine), &got); err != nil {
			t.Fatal(err)
		}
		if r := ptr.Deref(got.Spec.Worker.Replicas, 0); r != 2 {
			t.Errorf("after the editor's scale to 2 the MPIJob has %d workers", r)
		}

		// The status holds the operator's record of the job's generated Secrets.
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"restarts":7}}`))
		if err := editor.Status().Patch(ctx, &got, patch); !apierrors.IsForbidden(err) {
			t.Errorf("editor wrote the MPIJob's status: %v, want Forbidden", err)
		}

		if out := mustTroupe(t, "suspend", "-n", ns, "mpijob/by-editor", "--as", "editor"); !strings.Contains(out, "suspended") {
			t.Errorf("suspend as editor: %s", out)
		}
		if err := editor.Delete(ctx, &got); err != nil {
			t.Fatalf("editor deletes its MPIJob: %v", err)
		}
	})
}

// impersonate is a client of the test API server acting as user (with the groups the API
// server gives every authenticated user), as kubectl --as does.
func impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// applyUserRoles creates the objects config/rbac/users renders (kustomize, as kubectl apply -k
// does), the same directory both installs compose.
func applyUserRoles(t *testing.T) {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", "rbac", "users"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources()) == 0 {
		t.Fatal("config/rbac/users renders nothing")
	}
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		var cr rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cr); err != nil {
			t.Fatalf("%s %s: %v", r.GetKind(), r.GetName(), err)
		}
		if err := k8s.Create(context.Background(), &cr); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create ClusterRole %s: %v", cr.Name, err)
		}
	}
}

// aggregateBuiltinRoles does what kube-controller-manager's ClusterRole aggregation controller
// does to the built-in admin, edit and view: each gets the rules of every ClusterRole its
// aggregationRule selects (view is itself aggregated into edit, and edit into admin, so the
// rules settle after a few passes).
func aggregateBuiltinRoles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for range 4 {
		changed := false
		for _, name := range []string{"view", "edit", "admin"} {
			var role rbacv1.ClusterRole
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &role); err != nil {
				t.Fatal(err)
			}
			if role.AggregationRule == nil {
				t.Fatalf("the built-in ClusterRole %s has no aggregationRule", name)
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range role.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					t.Fatal(err)
				}
				var l rbacv1.ClusterRoleList
				if err := k8s.List(ctx, &l, client.MatchingLabelsSelector{Selector: s}); err != nil {
					t.Fatal(err)
				}
				slices.SortFunc(l.Items, func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
				for _, cr := range l.Items {
					for _, r := range cr.Rules {
						if cr.Name != name && !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
							rules = append(rules, r)
						}
					}
				}
			}
			if !equality.Semantic.DeepEqual(rules, role.Rules) {
				role.Rules = rules
				if err := k8s.Update(ctx, &role); err != nil {
					t.Fatal(err)
				}
				changed = true
			}
		}
		if !changed {
			return
		}
	}
	t.Fatal("the built-in roles' aggregated rules did not settle")
}
