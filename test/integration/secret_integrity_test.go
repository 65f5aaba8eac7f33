package integration

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// editSecret changes the data of a Secret as someone with write access to Secrets could.
func editSecret(t *testing.T, ns, name string, edit func(data map[string][]byte)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s corev1.Secret
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return err
		}
		edit(s.Data)
		return k8s.Update(context.Background(), &s)
	}); err != nil {
		t.Fatal(err)
	}
}

// The generated SSH Secret's hash is recorded in the job's status. Someone who changes its
// keys (to log into the workers with a key of their own) gets the job a SecretTampered
// condition and a Warning event, and the launcher is not started with those keys: resuming
// the job leaves its master Job suspended. Putting the data back clears it.
func TestTamperedSSHSecretHoldsTheLauncher(t *testing.T) {
	ns := newNamespace(t)
	job := sshJob("a", ns)
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	create(t, job)
	secret := waitFor(t, &corev1.Secret{}, ns, "a-ssh")
	waitForJob(t, ns, "a", "the Secret recorded", func(j *troupev1.ChainerJob) bool {
		return len(j.Status.GeneratedSecrets) == 1 && j.Status.GeneratedSecrets[0].Name == "a-ssh" &&
			len(j.Status.GeneratedSecrets[0].SHA256) == 64
	})
	original := secret.Data[mpi.SSHAuthorizedKey]

	editSecret(t, ns, "a-ssh", func(data map[string][]byte) {
		data[mpi.SSHAuthorizedKey] = []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIForeignKeyForeignKeyForeignKeyForeignKey intruder\n")
	})
	got := waitForJob(t, ns, "a", "SecretTampered", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionSecretTampered)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionSecretTampered); c.Reason != troupev1.ReasonGeneratedSecretModified ||
		!strings.Contains(c.Message, "a-ssh") {
		t.Errorf("SecretTampered = %s %q, want %s naming a-ssh", c.Reason, c.Message, troupev1.ReasonGeneratedSecretModified)
	}
	expectEvent(t, ns, "a", troupev1.EventSecretTampered)

	// Resuming does not start the launcher with the foreign keys.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j troupev1.ChainerJob
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, &j); err != nil {
			return err
		}
		j.Spec.RunPolicy.Suspend = ptr.To(false)
		return k8s.Update(context.Background(), &j)
	}); err != nil {
		t.Fatal(err)
	}
	waitForJob(t, ns, "a", "the resume observed", func(j *troupev1.ChainerJob) bool {
		return j.Status.ObservedGeneration == j.Generation && j.Status.Phase != troupev1.JobSuspended
	})
	master := waitFor(t, &batchv1.Job{}, ns, "a-master")
	if !ptr.Deref(master.Spec.Suspend, false) {
		t.Errorf("the master Job was resumed with a tampered SSH Secret")
	}

	// The keys put back: the launcher starts.
	editSecret(t, ns, "a-ssh", func(data map[string][]byte) { data[mpi.SSHAuthorizedKey] = original })
	waitForJob(t, ns, "a", "SecretTampered False", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionSecretTampered)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	waitUntil(t, &batchv1.Job{}, ns, "a-master", "resumed", func(j *batchv1.Job) bool { return !ptr.Deref(j.Spec.Suspend, true) })
}

// A generated SSH Secret deleted after the job started fails the job with a clear message:
// new keys would not match the host key and authorized keys its running pods hold. The
// Secret is not generated again.
func TestDeletedSSHSecretFailsAStartedJob(t *testing.T) {
	ns := newNamespace(t)
	create(t, sshJob("a", ns))
	secret := waitFor(t, &corev1.Secret{}, ns, "a-ssh")
	waitForJob(t, ns, "a", "started with its Secret recorded", func(j *troupev1.ChainerJob) bool {
		return j.Status.StartTime != nil && len(j.Status.GeneratedSecrets) == 1
	})
	if err := k8s.Delete(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got := waitForJob(t, ns, "a", "Failed", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobFailed })
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != troupev1.ReasonGeneratedSecretDeleted || !strings.Contains(c.Message, "a-ssh") {
		t.Errorf("Failed condition = %+v, want True, %s, naming a-ssh", c, troupev1.ReasonGeneratedSecretDeleted)
	}
	expectEvent(t, ns, "a", troupev1.EventFailed)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a-ssh"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the deleted Secret of a started job was generated again (err %v)", err)
	}
}

// Before the job ever started no pod holds the keys: a deleted Secret is generated again.
func TestDeletedSSHSecretOfAJobNotStartedIsRegenerated(t *testing.T) {
	ns := newNamespace(t)
	job := sshJob("a", ns)
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	create(t, job)
	secret := waitFor(t, &corev1.Secret{}, ns, "a-ssh")
	waitForJob(t, ns, "a", "the Secret recorded", func(j *troupev1.ChainerJob) bool { return len(j.Status.GeneratedSecrets) == 1 })
	if err := k8s.Delete(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a regenerated a-ssh", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-ssh"}, &s)
		return err == nil && s.UID != secret.UID && len(s.Data[mpi.SSHClientKey]) > 0, client.IgnoreNotFound(err)
	})
	got := waitForJob(t, ns, "a", "the new Secret recorded", func(j *troupev1.ChainerJob) bool {
		return len(j.Status.GeneratedSecrets) == 1 && j.Status.GeneratedSecrets[0].SHA256 != ""
	})
	if got.Status.Phase != troupev1.JobSuspended {
		t.Errorf("phase = %q, want Suspended", got.Status.Phase)
	}
}
