package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// etcdRequestLimit is etcd's default --max-request-bytes, the largest object the API server
// can store.
const etcdRequestLimit = 1536 << 10

// podsOfAType are n pods of a job's worker set with names as long as a pod name gets, phase
// ended for the first ended of them.
func podsOfAType(n, ended int) []corev1.Pod {
	pods := make([]corev1.Pod, n)
	for i := range pods {
		name := fmt.Sprintf("%s-%d", strings.Repeat("w", 52), i)
		pods[i] = corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Labels: map[string]string{troupev1.LabelRole: troupev1.RoleWorker},
		}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if i < ended {
			pods[i].Status.Phase = corev1.PodFailed
		}
	}
	return pods
}

// status.tasks lists at most MaxPodsPerJob worker pods, the live ones first (every live worker
// of the largest job), and MaxMasterTaskPods of the master, and counts the rest; a type within
// the bound is listed whole.
func TestTasksAreBounded(t *testing.T) {
	s := &Spec{WorkerSets: []WorkerSet{{Name: "ws"}}}
	const pods, ended = 6000, 2000
	got := tasks(s, podsOfAType(pods, ended))[1]
	if len(got.Status) != troupev1.MaxPodsPerJob || got.Unlisted != pods-troupev1.MaxPodsPerJob {
		t.Fatalf("%d listed, %d unlisted; want %d and %d", len(got.Status), got.Unlisted, troupev1.MaxPodsPerJob, pods-troupev1.MaxPodsPerJob)
	}
	running := 0
	for i, p := range got.Status {
		if p.Phase == corev1.PodRunning {
			running++
		}
		if i > 0 && got.Status[i-1].Name >= p.Name {
			t.Fatalf("not sorted by name at %d: %s, %s", i, got.Status[i-1].Name, p.Name)
		}
	}
	if running != pods-ended {
		t.Errorf("%d running pods listed, want all %d (live pods before ended ones)", running, pods-ended)
	}
	master := podsOfAType(100, 99)
	for i := range master {
		master[i].Labels[troupev1.LabelRole] = troupev1.RoleMaster
	}
	m := tasks(s, master)[0]
	live := slices.ContainsFunc(m.Status, func(p troupev1.PodReference) bool { return p.Phase == corev1.PodRunning })
	if len(m.Status) != troupev1.MaxMasterTaskPods || m.Unlisted != 100-troupev1.MaxMasterTaskPods || !live {
		t.Errorf("master: %d listed (the running one among them: %t), %d unlisted; want %d with the running one, %d",
			len(m.Status), live, m.Unlisted, troupev1.MaxMasterTaskPods, 100-troupev1.MaxMasterTaskPods)
	}
	small := tasks(s, podsOfAType(10, 3))[1]
	if len(small.Status) != 10 || small.Unlisted != 0 {
		t.Errorf("10 pods: %d listed, %d unlisted; want all listed", len(small.Status), small.Unlisted)
	}
}

// Every condition message is cut to ConditionMessageLimit on a UTF-8 boundary.
func TestConditionMessagesAreBounded(t *testing.T) {
	conds := []metav1.Condition{
		{Type: "Failed", Message: strings.Repeat("é", troupev1.ConditionMessageLimit)},
		{Type: "Running", Message: "the master is running"},
	}
	fitConditionMessages(conds)
	if m := conds[0].Message; len(m) > troupev1.ConditionMessageLimit || !utf8.ValidString(m) || !strings.HasSuffix(m, noteCut) {
		t.Errorf("long message: %d bytes, valid %t; want at most %d, valid, marked as cut", len(m), utf8.ValidString(m), troupev1.ConditionMessageLimit)
	}
	if conds[1].Message != "the master is running" {
		t.Errorf("short message changed: %q", conds[1].Message)
	}
}

// The largest job troupe admits, with the largest status it writes (every condition type at
// the message bound, two task types at the pod bound, every other count set), is below
// etcd's request limit: the status write never fails for size.
func TestLargestJobFitsEtcd(t *testing.T) {
	job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{
		Name: strings.Repeat("j", 63), Namespace: strings.Repeat("n", 63),
		Annotations: map[string]string{"pad": strings.Repeat("x", troupev1.MaxJobBytes)},
	}}
	s := &Spec{WorkerSets: []WorkerSet{{Name: "ws"}}}
	master := podsOfAType(2*troupev1.MaxMasterTaskPods, 0)
	for i := range master {
		master[i].Labels[troupev1.LabelRole] = troupev1.RoleMaster
	}
	job.Status.Tasks = tasks(s, append(master, podsOfAType(2*troupev1.MaxPodsPerJob, 0)...))
	for _, c := range []string{
		troupev1.ConditionInitialized, troupev1.ConditionFailed, troupev1.ConditionSecretTampered, troupev1.ConditionAdmitted,
		troupev1.ConditionPaused, troupev1.ConditionGangScheduled, "Running", "Succeeded", "Restarting", "Suspended",
		"WorkersReady", "LauncherWaiting", "ReplicaFailure", "Completed", "Complete", "Extra1", "Extra2", "Extra3",
	} {
		job.Status.Conditions = append(job.Status.Conditions, metav1.Condition{
			Type: c, Status: metav1.ConditionTrue, Reason: strings.Repeat("R", 128), Message: strings.Repeat("m", 1<<20),
			LastTransitionTime: metav1.Now(),
		})
	}
	fitConditionMessages(job.Status.Conditions)
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= etcdRequestLimit {
		t.Errorf("the largest job with the largest status is %d bytes, over etcd's %d", len(data), etcdRequestLimit)
	}
	t.Logf("largest job with the largest status: %d bytes of %d", len(data), etcdRequestLimit)
}
