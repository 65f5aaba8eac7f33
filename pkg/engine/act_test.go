package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The report reads the observation as the pass left the children (Observed.after); the
// observation itself stays as observed.
func TestObservedAfterActing(t *testing.T) {
	s := testSpec()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.ServiceName()}}
	sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	master := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: s.Master.JobName}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "train-ssh", ResourceVersion: "9"}, Data: map[string][]byte{"k": []byte("v")}}
	orphanSecret := ownedSecret()
	orphanSecret.Name = "train-other"

	obs := &Observed{
		StatefulSets: map[string]*appsv1.StatefulSet{},
		current:      map[childRef]client.Object{},
		Missing: []childRef{keyOf(svc), keyOf(sts), keyOf(master), keyOf(secret),
			{Kind: "Secret", Name: "train-other"}, {Kind: "ConfigMap", Name: "train-mpi"}},
		Secrets: secretIntegrity{checked: true},
	}
	before := *obs
	acted := actResult{
		Created:       []client.Object{svc, sts, secret},
		Claimed:       []claimedChild{{want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "train-other"}}, cur: orphanSecret}},
		Conflicts:     []childRef{{Kind: "ConfigMap", Name: "train-mpi"}},
		HeldTemplates: []string{sts.Name},
	}
	after := obs.after(acted)

	if diff := cmp.Diff(before.Missing, obs.Missing); diff != "" || len(obs.current) != 0 || len(obs.StatefulSets) != 0 ||
		len(obs.Conflicts) != 0 || len(obs.HeldTemplates) != 0 || len(obs.Secrets.Records) != 0 {
		t.Fatalf("after changed the observation: missing %v, current %d, sets %d, conflicts %v, held %v, records %v",
			obs.Missing, len(obs.current), len(obs.StatefulSets), obs.Conflicts, obs.HeldTemplates, obs.Secrets.Records)
	}
	wantMissing := []childRef{keyOf(master), {Kind: "ConfigMap", Name: "train-mpi"}}
	if diff := cmp.Diff(wantMissing, after.Missing); diff != "" {
		t.Errorf("missing after acting (-want +got):\n%s", diff)
	}
	if after.StatefulSets[s.WorkerSets[0].Name] != sts || after.current[childRef{Kind: "Secret", Name: "train-other"}] != orphanSecret {
		t.Errorf("created and claimed children are not counted as existing: %v", after.current)
	}
	if diff := cmp.Diff([]childRef{{Kind: "ConfigMap", Name: "train-mpi"}}, after.Conflicts); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{sts.Name}, after.HeldTemplates); diff != "" {
		t.Errorf("held templates (-want +got):\n%s", diff)
	}
	wantRecords := []troupev1.GeneratedSecretRecord{{Name: "train-ssh", SHA256: secretDataHash(secret.Data), ResourceVersion: "9"}}
	if diff := cmp.Diff(wantRecords, after.Secrets.Records); diff != "" {
		t.Errorf("records of the generated Secrets created (-want +got):\n%s", diff)
	}
}
