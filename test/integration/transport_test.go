package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

func sshJob(name, ns string) *troupev1.ChainerJob {
	job := testutil.MakeChainerJob(name, ns).WorkerSet("ws0", 2).Obj()
	job.Spec.Transport = troupev1.MPITransportSSH
	return job
}

// Two jobs get two Secrets with keys of their own, and reconciling never regenerates them.
func TestSSHSecretsArePerJob(t *testing.T) {
	ns := newNamespace(t)
	a, b := create(t, sshJob("a", ns)), create(t, sshJob("b", ns))
	sa := waitFor(t, &corev1.Secret{}, ns, "a-ssh")
	sb := waitFor(t, &corev1.Secret{}, ns, "b-ssh")
	checkOwnedAndLabelled(t, sa, a, map[string]string{"chainerjob.troupe.dev/name": "a", troupev1.LabelJobUID: string(a.UID)})
	checkOwnedAndLabelled(t, sb, b, map[string]string{"chainerjob.troupe.dev/name": "b", troupev1.LabelJobUID: string(b.UID)})
	for _, k := range []string{mpi.SSHClientKey, mpi.SSHHostKey, mpi.SSHAuthorizedKey, mpi.SSHKnownHosts} {
		if len(sa.Data[k]) == 0 {
			t.Errorf("Secret a-ssh lacks %s", k)
		}
		if bytes.Equal(sa.Data[k], sb.Data[k]) {
			t.Errorf("jobs a and b share %s", k)
		}
	}
	if !strings.HasPrefix(string(sa.Data[mpi.SSHKnownHosts]), "*.a."+ns+".svc,") {
		t.Errorf("known_hosts of a does not pin a's domain: %q", sa.Data[mpi.SSHKnownHosts])
	}

	// A scale change rewrites the ConfigMap but leaves the keys and the running workers' pod
	// template as they were (a changed template would restart every worker).
	before := waitFor(t, &appsv1.StatefulSet{}, ns, "a-workerset-ws0")
	scale(t, ns, "a", 3)
	eventually(t, "hostfile with 3 workers", func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-mpi"}, &cm)
		return err == nil && strings.Count(cm.Data[mpi.HostfileKey], "\n") == 4, err
	})
	after := &appsv1.StatefulSet{}
	eventually(t, "a-workerset-ws0 scaled to 3", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-workerset-ws0"}, after)
		return err == nil && *after.Spec.Replicas == 3, err
	})
	if !equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) {
		t.Errorf("the scale-up changed the workers' pod template, which restarts every worker")
	}
	again := waitFor(t, &corev1.Secret{}, ns, "a-ssh")
	if !bytes.Equal(again.Data[mpi.SSHClientKey], sa.Data[mpi.SSHClientKey]) || again.ResourceVersion != sa.ResourceVersion {
		t.Errorf("the job's keys were rewritten by a reconcile")
	}
	// A deleted or changed Secret: secret_integrity_test.go.
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	// The operator writes the job's status meanwhile: read and update again on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &troupev1.ChainerJob{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return err
		}
		testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To(replicas) })
		return k8s.Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("scale %s: %v", name, err)
	}
}

// canI asks the API server's authorizer whether the job's exec ServiceAccount may do verb on
// a pod (or its subresource) by name.
func canI(t *testing.T, ns, account, verb, subresource, pod string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   fmt.Sprintf("system:serviceaccount:%s:%s", ns, account),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Resource: "pods", Subresource: subresource, Name: pod,
		},
	}}
	if err := k8s.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed
}

// The KubeExec Role lets the launcher exec into its own job's worker pods, by name, and nothing
// else; it follows scale changes.
func TestKubeExecRoleAllowsOnlyTheJobsPods(t *testing.T) {
	ns := newNamespace(t)
	job := create(t, testutil.MakeChainerJob("kx", ns).WorkerSet("ws0", 2).Obj())
	create(t, testutil.MakeChainerJob("other", ns).WorkerSet("ws0", 1).Obj())
	sa := waitFor(t, &corev1.ServiceAccount{}, ns, "kx-exec")
	checkOwnedAndLabelled(t, sa, job, map[string]string{"chainerjob.troupe.dev/name": "kx", troupev1.LabelJobUID: string(job.UID)})
	waitFor(t, &rbacv1.RoleBinding{}, ns, "kx-exec")
	waitFor(t, &rbacv1.Role{}, ns, "kx-exec")

	master := waitFor(t, &batchv1.Job{}, ns, "kx-master")
	if got := master.Spec.Template.Spec.ServiceAccountName; got != "kx-exec" {
		t.Errorf("launcher ServiceAccount = %q, want kx-exec", got)
	}

	own := "kx-workerset-ws0-1"
	// The API server's authorizer learns of a new Role and RoleBinding through its own
	// informers, a moment after they are stored.
	eventually(t, "the job's Role to reach the authorizer", func(context.Context) (bool, error) {
		return canI(t, ns, "kx-exec", "create", "exec", own), nil
	})
	checks := []struct {
		verb, sub, pod string
		want           bool
	}{
		{"create", "exec", own, true},
		{"get", "exec", own, true}, // WebSocket exec
		{"get", "", own, true},
		{"create", "exec", "kx-workerset-ws0-2", false}, // not (yet) a pod of the job
		{"create", "exec", "other-workerset-ws0-0", false},
		{"create", "exec", "", false}, // no name: any pod
		{"list", "", "", false},
		{"delete", "", own, false},
		{"update", "", own, false},
	}
	for _, c := range checks {
		if got := canI(t, ns, "kx-exec", c.verb, c.sub, c.pod); got != c.want {
			t.Errorf("kx-exec may %s pods/%s %q: %v, want %v", c.verb, c.sub, c.pod, got, c.want)
		}
	}

	scale(t, ns, "kx", 3)
	eventually(t, "the Role to follow the scale-up", func(context.Context) (bool, error) {
		return canI(t, ns, "kx-exec", "create", "exec", "kx-workerset-ws0-2"), nil
	})
}

// The launcher starts only after its init container has waited for the workers; a wait that
// times out fails the job at once, without retries.
func TestLauncherWaitsForWorkers(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("w", ns).WorkerSet("ws0", 2).Obj()
	job.Spec.WaitForWorkersTimeoutSeconds = ptr.To[int32](42)
	create(t, job)
	master := waitFor(t, &batchv1.Job{}, ns, "w-master")
	init := master.Spec.Template.Spec.InitContainers
	if len(init) != 1 || init[0].Name != mpi.WaitContainerName || init[0].Image != testAgentImage {
		t.Fatalf("launcher init containers = %+v, want %s from %s", init, mpi.WaitContainerName, testAgentImage)
	}
	if !contains(init[0].Args, "--timeout=42s") || !contains(init[0].Args, "--transport=KubeExec") {
		t.Errorf("wait args = %v, want the spec's timeout and the job's transport", init[0].Args)
	}
	p := master.Spec.PodFailurePolicy
	if p == nil || len(p.Rules) != 1 || p.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob {
		t.Errorf("pod failure policy = %+v, want FailJob when the wait times out", p)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
