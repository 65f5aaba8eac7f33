package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// kube-openmpi's features as fields of our kinds: code from git, a user's SSH Secret,
// cleanPodPolicyOn (autoScaleDownWorkers), a PodDisruptionBudget, and worker StatefulSets that
// are scaled through their job.

// smallMPIJob is the T9k example with two workers.
func smallMPIJob(t *testing.T, ns string) *troupev1.MPIJob {
	t.Helper()
	job := testutil.Load[*troupev1.MPIJob](t, exampleMPIJob, ns)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	return job
}

func createMPIJob(t *testing.T, job *troupev1.MPIJob) {
	t.Helper()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create MPIJob: %v", err)
	}
}

// waitForEvent waits for an event on the job with reason whose note contains text, and
// returns the note.
func waitForEvent(t *testing.T, ns, jobName, reason, text string) string {
	t.Helper()
	var note string
	eventually(t, "event "+reason+" saying "+text, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == jobName && e.Reason == reason && strings.Contains(e.Note, text) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

func hasEvent(t *testing.T, ns, jobName, reason string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == jobName && e.Reason == reason {
			return true
		}
	}
	return false
}

// A repository of appCodesToSync is cloned by an init container in every pod of the job and
// mounted in every container; while its deploy-key Secret is missing, the job says so and
// creates no pods.
func TestAppCodesToSync(t *testing.T) {
	ns := newNamespace(t)
	job := smallMPIJob(t, ns)
	job.Spec.AppCodesToSync = []troupev1.AppCode{{
		Name: "app", GitRepo: "git@git.example.com:org/app.git", GitBranch: "release-1",
		MountPath: "/code", SubPath: "examples", GitSecretName: "deploy-key",
	}}
	createMPIJob(t, job)

	got := waitForMPIJob(t, ns, "mpi-example", "Initialized=False for the missing Secret", func(j *troupev1.MPIJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonSecretMissing
	})
	msg := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized).Message
	if want := `spec.appCodesToSync[0].gitSecretName: Secret "deploy-key" not found; create it with the keys ssh`; msg != want {
		t.Errorf("Initialized message = %q, want %q", msg, want)
	}
	waitForEvent(t, ns, "mpi-example", troupev1.EventSecretMissing, "deploy-key")
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &batchv1.Job{}} {
		name := map[bool]string{true: "mpi-example-worker", false: "mpi-example-launcher"}[isStatefulSet(obj)]
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s exists while the job's Secret is missing (err %v)", name, err)
		}
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "deploy-key", Namespace: ns}, Data: map[string][]byte{"ssh": []byte("key")}}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	launcher := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	for role, tmpl := range map[string]*corev1.PodTemplateSpec{"worker": &sts.Spec.Template, "launcher": &launcher.Spec.Template} {
		init := tmpl.Spec.InitContainers
		if len(init) == 0 || init[0].Name != "git-app" || init[0].Image != testAgentImage {
			t.Fatalf("%s: init containers %v, want git-app first, from the agent image", role, init)
		}
		wantArgs := "git-sync --repo=git@git.example.com:org/app.git --dest=/troupe/code --branch=release-1 --ssh-dir=/etc/troupe/git-ssh"
		if got := strings.Join(init[0].Args, " "); got != wantArgs {
			t.Errorf("%s: git-app runs %q, want %q", role, got, wantArgs)
		}
		for _, c := range tmpl.Spec.Containers {
			if !mountsAt(c, "code-app", "/code", "examples") {
				t.Errorf("%s: container %s does not mount the clone's examples at /code: %v", role, c.Name, c.VolumeMounts)
			}
		}
		if v := volume(tmpl, "git-ssh-app"); v == nil || v.Secret == nil || v.Secret.SecretName != "deploy-key" {
			t.Errorf("%s: deploy key volume = %+v, want Secret deploy-key", role, v)
		}
	}
	waitForMPIJob(t, ns, "mpi-example", "Initialized", func(j *troupev1.MPIJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionInitialized)
	})
}

func isStatefulSet(o client.Object) bool { _, ok := o.(*appsv1.StatefulSet); return ok }

func mountsAt(c corev1.Container, volume, path, subPath string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == path && m.SubPath == subPath {
			return true
		}
	}
	return false
}

func volume(tmpl *corev1.PodTemplateSpec, name string) *corev1.Volume {
	for i := range tmpl.Spec.Volumes {
		if tmpl.Spec.Volumes[i].Name == name {
			return &tmpl.Spec.Volumes[i]
		}
	}
	return nil
}

// With ssh.secretName the pods use the user's key and authorized keys beside the job's own
// host key; a Secret that lacks a key is reported, and fixing it lets the job start.
func TestUserSSHSecret(t *testing.T) {
	ns := newNamespace(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "my-key", Namespace: ns},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: []byte("private")},
	}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	job := smallMPIJob(t, ns)
	job.Spec.SSH.SecretName = "my-key"
	createMPIJob(t, job)
	got := waitForMPIJob(t, ns, "mpi-example", "Initialized=False for the incomplete Secret", func(j *troupev1.MPIJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonSecretMissing
	})
	if msg := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized).Message; msg != `spec.ssh.secretName: Secret "my-key" lacks the keys authorized_keys` {
		t.Errorf("Initialized message = %q", msg)
	}
	waitForEvent(t, ns, "mpi-example", troupev1.EventSecretMissing, "authorized_keys")

	secret.Data[troupev1.SSHSecretAuthorizedKeys] = []byte("ssh-ed25519 AAAA user")
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	v := volume(&sts.Spec.Template, "troupe-ssh")
	if v == nil || v.Projected == nil || len(v.Projected.Sources) != 2 ||
		v.Projected.Sources[0].Secret.Name != "mpi-example-ssh" || v.Projected.Sources[1].Secret.Name != "my-key" {
		t.Fatalf("SSH volume = %+v, want the job's host key and the user's Secret projected together", v)
	}
	cm := waitFor(t, &corev1.ConfigMap{}, ns, "mpi-example-mpi")
	if !strings.Contains(cm.Data[mpi.SSHClientConfigKey], "IdentityFile /etc/troupe/ssh/ssh-privatekey\n") {
		t.Errorf("ssh_config does not use the user's key:\n%s", cm.Data[mpi.SSHClientConfigKey])
	}
	if !strings.Contains(cm.Data[mpi.SSHDConfigKey], "AuthorizedKeysFile /etc/troupe/ssh/authorized_keys\n") {
		t.Errorf("sshd_config does not accept the user's authorized_keys:\n%s", cm.Data[mpi.SSHDConfigKey])
	}
}

// cleanPodPolicyOn Succeeded (kube-openmpi's autoScaleDownWorkers) releases the workers only
// after a success; a failed job keeps them running for inspection.
func TestCleanPodPolicyOnSucceeded(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name    string
		outcome batchv1.JobConditionType
		phase   troupev1.JobPhase
		workers int32
	}{
		{"ok", batchv1.JobComplete, troupev1.JobSucceeded, 0},
		{"bad", batchv1.JobFailed, troupev1.JobFailed, 2},
	} {
		job := testutil.MakeChainerJob(tc.name, ns).WorkerSet("ws0", 2).Obj()
		job.Spec.RunPolicy.CleanPodPolicyOn = ptr.To(troupev1.CleanPodPolicyOnSucceeded)
		create(t, job)
		waitFor(t, &appsv1.StatefulSet{}, ns, tc.name+"-workerset-ws0")
		finishMaster(t, ns, tc.name, tc.outcome, "Reason", "ended")
		waitForJob(t, ns, tc.name, string(tc.phase), func(j *troupev1.ChainerJob) bool { return j.Status.Phase == tc.phase })
		sts := waitUntil(t, &appsv1.StatefulSet{}, ns, tc.name+"-workerset-ws0", "settled", func(s *appsv1.StatefulSet) bool {
			return *s.Spec.Replicas == tc.workers
		})
		// Give a wrong release the time of another reconcile to show.
		touch(t, ns, tc.name)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sts), sts); err != nil || *sts.Spec.Replicas != tc.workers {
			t.Errorf("%s: %d workers after the master %s, want %d (err %v)", tc.name, *sts.Spec.Replicas, tc.outcome, tc.workers, err)
		}
	}
}

// touch changes the job's TTL and waits until the operator acknowledged the new generation.
func touch(t *testing.T, ns, name string) {
	t.Helper()
	job := &troupev1.ChainerJob{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := k8s.Patch(context.Background(), job, patch); err != nil {
		t.Fatal(err)
	}
	waitForJob(t, ns, name, "the update observed", func(j *troupev1.ChainerJob) bool { return j.Status.ObservedGeneration == j.Generation })
}

// podDisruptionBudget.enabled gives the workers a budget that allows no eviction, following
// the worker count; turning it off deletes it.
func TestPodDisruptionBudget(t *testing.T) {
	ns := newNamespace(t)
	job := smallMPIJob(t, ns)
	job.Spec.SchedulingPolicy.PodDisruptionBudget = &troupev1.PodDisruptionBudgetPolicy{Enabled: true}
	createMPIJob(t, job)
	pdb := waitFor(t, &policyv1.PodDisruptionBudget{}, ns, "mpi-example")
	if !metav1.IsControlledBy(pdb, job) {
		t.Errorf("the budget is not the job's: %v", pdb.OwnerReferences)
	}
	if got := pdb.Spec.MinAvailable.IntValue(); got != 2 {
		t.Errorf("minAvailable = %d, want the 2 workers", got)
	}
	want := map[string]string{troupev1.LabelJobUID: string(job.UID), troupev1.LabelRole: troupev1.RoleWorker}
	if pdb.Spec.Selector == nil || !equalMaps(pdb.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector = %v, want the job's workers %v", pdb.Spec.Selector, want)
	}

	kubectl(t, "scale", "-n", ns, "mpijob/mpi-example", "--replicas=3")
	waitUntil(t, pdb, ns, "mpi-example", "minAvailable 3", func(p *policyv1.PodDisruptionBudget) bool {
		return p.Spec.MinAvailable.IntValue() == 3
	})

	kubectl(t, "patch", "-n", ns, "mpijob/mpi-example", "--type=merge", "-p", `{"spec":{"schedulingPolicy":{"podDisruptionBudget":{"enabled":false}}}}`)
	eventually(t, "the budget deleted", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Scaling the job moves its StatefulSet quietly; scaling the StatefulSet itself is undone, with
// a Warning on the job that gives the command which scales the job.
func TestWorkerStatefulSetIsScaledThroughItsJob(t *testing.T) {
	ns := newNamespace(t)
	createMPIJob(t, smallMPIJob(t, ns))
	waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")

	kubectl(t, "scale", "-n", ns, "mpijob/mpi-example", "--replicas=3")
	waitUntil(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker", "3 replicas", func(s *appsv1.StatefulSet) bool { return *s.Spec.Replicas == 3 })
	touchMPIJob(t, ns, "mpi-example")
	if hasEvent(t, ns, "mpi-example", troupev1.EventScaledOutsideJob) {
		t.Errorf("scaling the job itself was reported as a scale outside the job")
	}

	kubectl(t, "scale", "-n", ns, "statefulset/mpi-example-worker", "--replicas=5")
	note := waitForEvent(t, ns, "mpi-example", troupev1.EventScaledOutsideJob, "kubectl scale mpijob/mpi-example --replicas=5")
	want := "StatefulSet mpi-example-worker was scaled to 5 outside the job; troupe restored the job's 3 replicas. " +
		"To change the worker count, scale the job: kubectl scale mpijob/mpi-example --replicas=5"
	if note != want {
		t.Errorf("event = %q, want %q", note, want)
	}
	waitUntil(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker", "back at 3 replicas", func(s *appsv1.StatefulSet) bool { return *s.Spec.Replicas == 3 })
	job := waitForMPIJob(t, ns, "mpi-example", "", func(*troupev1.MPIJob) bool { return true })
	if *job.Spec.Worker.Replicas != 3 {
		t.Errorf("the job's replicas became %d, want 3 as the user last set them", *job.Spec.Worker.Replicas)
	}
}

// touchMPIJob changes the job's TTL and waits until the operator acknowledged the new
// generation, so a reconcile ran after everything before it.
func touchMPIJob(t *testing.T, ns, name string) {
	t.Helper()
	kubectl(t, "patch", "-n", ns, "mpijob/"+name, "--type=merge", "-p", `{"spec":{"runPolicy":{"ttlSecondsAfterFinished":86400}}}`)
	waitForMPIJob(t, ns, name, "the update observed", func(j *troupev1.MPIJob) bool { return j.Status.ObservedGeneration == j.Generation })
}
