package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The kinds hand their repositories, the user's Secrets and how to scale a set to the engine.
func TestUserInputsReachTheEngine(t *testing.T) {
	job := t9kExample(t)
	job.Spec.AppCodesToSync = []troupev1.AppCode{
		{Name: "public", GitRepo: "https://git.example.com/a.git", MountPath: "/a"},
		{Name: "private", GitRepo: "git@git.example.com:org/b.git", MountPath: "/b", GitSecretName: "deploy-key"},
	}
	job.Spec.SSH.SecretName = "my-keys"
	s, err := describeMPIJob(t, job)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(engine.CodeSync{Image: "agent:1", Repos: job.Spec.AppCodesToSync}, s.CodeSync); diff != "" {
		t.Errorf("code sync (-want +got):\n%s", diff)
	}
	want := []engine.SecretRequirement{
		{Field: "spec.appCodesToSync[1].gitSecretName", Name: "deploy-key", Keys: []string{"ssh"}},
		{Field: "spec.ssh.secretName", Name: "my-keys", Keys: []string{"ssh-privatekey", "authorized_keys"}},
	}
	if diff := cmp.Diff(want, s.RequiredSecrets); diff != "" {
		t.Errorf("required Secrets (-want +got):\n%s", diff)
	}
	if got := s.WorkerSets[0].ScaleHint; got != "kubectl scale mpijob/mpi-example --replicas={replicas}" {
		t.Errorf("MPIJob scale hint = %q", got)
	}

	chainer := testutil.MakeChainerJob("mn", "ml").WorkerSet("ws0", 2).Obj()
	cs := &engine.Spec{Name: "mn", Namespace: "ml"}
	if err := (ChainerJob{Options{AgentImage: "agent:1"}}).Describe(chainer, cs); err != nil {
		t.Fatal(err)
	}
	if got := cs.WorkerSets[0].ScaleHint; got != "kubectl edit chainerjob/mn and set the replicas of worker set ws0 to {replicas}" {
		t.Errorf("ChainerJob scale hint = %q", got)
	}
	// A ChainerJob without MPI clones its code too.
	alone := testutil.MakeChainerJob("solo", "ml").Obj()
	alone.Spec.Backend = troupev1.ChainerBackendNone
	alone.Spec.AppCodesToSync = job.Spec.AppCodesToSync[:1]
	as := &engine.Spec{Name: "solo", Namespace: "ml"}
	if err := (ChainerJob{Options{AgentImage: "agent:1"}}).Describe(alone, as); err != nil || len(as.CodeSync.Repos) != 1 {
		t.Errorf("backend none: code sync %+v (err %v), want the repository", as.CodeSync, err)
	}
	// A ChainerJob's ssh.secretName counts only with the SSH transport (KubeExec by default):
	// with KubeExec it is refused, as the webhook refuses it, and no Secret is waited for.
	chainer.Spec.SSH = &troupev1.SSHConfig{SecretName: "my-keys"}
	cs = &engine.Spec{Name: "mn", Namespace: "ml"}
	if err := (ChainerJob{Options{}}).Describe(chainer, cs); err == nil || !strings.Contains(err.Error(), "spec.ssh.secretName: Forbidden") || len(cs.RequiredSecrets) != 0 {
		t.Errorf("KubeExec job requires %v (err %v), want spec.ssh.secretName refused and no Secret", cs.RequiredSecrets, err)
	}
}

// With --git-require-known-hosts a git deploy-key Secret must hold known_hosts too: a job whose
// Secret lacks it waits with SecretMissing naming the key (the engine's Secret check).
func TestRequireGitKnownHosts(t *testing.T) {
	job := testutil.MakeChainerJob("mn", "ml").WorkerSet("ws0", 1).Obj()
	job.Spec.AppCodesToSync = []troupev1.AppCode{{Name: "private", GitRepo: "git@git.example.com:org/b.git", MountPath: "/b", GitSecretName: "deploy-key"}}
	s := &engine.Spec{Name: "mn", Namespace: "ml"}
	if err := (ChainerJob{Options{AgentImage: "agent:1", RequireGitKnownHosts: true}}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	want := []engine.SecretRequirement{{Field: "spec.appCodesToSync[0].gitSecretName", Name: "deploy-key", Keys: []string{"ssh", "known_hosts"}}}
	if diff := cmp.Diff(want, s.RequiredSecrets); diff != "" {
		t.Errorf("required Secrets (-want +got):\n%s", diff)
	}
}
