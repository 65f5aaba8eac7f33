package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

var (
	t0       = metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	t1       = metav1.NewTime(t0.Add(time.Minute))
	now      = metav1.NewTime(t0.Add(time.Hour))
	earlier  = metav1.NewTime(t0.Add(-time.Hour))
	genOfJob = int64(2)
)

// observed builds an observation of testSpec's children fluently.
type observed struct{ Observed }

func observe() *observed {
	return &observed{Observed{StatefulSets: map[string]*appsv1.StatefulSet{}}}
}

func (o *observed) master(mutate func(*batchv1.Job)) *observed {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-master", CreationTimestamp: t0}}
	if mutate != nil {
		mutate(j)
	}
	o.MasterJob = j
	return o
}

func (o *observed) workers(set string, ready int32) *observed {
	o.StatefulSets[set] = &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{ReadyReplicas: ready}}
	return o
}

func (o *observed) pod(role, set string, phase corev1.PodPhase, restarts int32) *observed {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{troupev1.LabelRole: role, troupev1.LabelWorkerSet: set}},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: restarts}}},
	}
	o.Pods = append(o.Pods, p)
	return o
}

// namedPod is a running worker pod of testSpec, named <job>-workerset-<set>-<ordinal>.
func namedPod(name string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	set := strings.TrimPrefix(name[:strings.LastIndex(name, "-")], "train-workerset-")
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{troupev1.LabelRole: troupev1.RoleWorker, troupev1.LabelWorkerSet: set}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// withPods sets the observed pods.
func (o *observed) withPods(pods ...corev1.Pod) *observed {
	o.Pods = pods
	return o
}

// obj is the observation, complete: the master's verdict computed as observe does.
func (o *observed) obj() *Observed {
	o.setPods(o.Pods)
	o.Verdict = masterVerdict(o.MasterJob, o.MasterPods)
	return &o.Observed
}

func finishedJob(t batchv1.JobConditionType, reason, msg string) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{
			Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: t1,
		}}
		if t == batchv1.JobComplete {
			j.Status.CompletionTime = &t1
			j.Status.Succeeded = 1
		} else {
			j.Status.Failed = 4
		}
	}
}

// conditionSummary reduces conditions to "Type=Status/Reason" for compact expectations.
func conditionSummary(cs []metav1.Condition) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

func TestComputeStatus(t *testing.T) {
	allReady := func() *observed {
		return observe().master(func(j *batchv1.Job) { j.Status.Active = 1; j.Status.Ready = ptr.To[int32](1) }).
			workers("cpu", 2).workers("gpu", 1).
			pod("master", "", corev1.PodRunning, 0).
			pod("worker", "cpu", corev1.PodRunning, 1).pod("worker", "cpu", corev1.PodRunning, 2).
			pod("worker", "gpu", corev1.PodRunning, 0)
	}
	tests := map[string]struct {
		spec           func(*Spec)
		obs            *Observed
		prev           troupev1.JobStatus
		wantPhase      troupev1.JobPhase
		wantConditions map[string]string
		wantWorkers    string
		wantReplicas   []troupev1.ReplicaStatus
		wantPods       troupev1.PodPhaseCounts
		wantStart      *metav1.Time
		wantCompletion *metav1.Time
	}{
		"nothing created yet": {
			obs: func() *Observed {
				o := observe().obj()
				o.Missing = []childRef{{"Service", "train"}, {"Job", "train-master"}}
				return o
			}(),
			wantPhase: troupev1.JobPending,
			wantConditions: map[string]string{
				"Initialized": "False/CreatingChildren", "WorkersReady": "False/WorkersNotReady",
				"Running": "False/MasterNotRunning", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "0/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1}, {Name: "cpu", Replicas: 2}, {Name: "gpu", Replicas: 1},
			},
		},
		"workers starting": {
			obs:       observe().master(nil).workers("cpu", 1).workers("gpu", 0).pod("worker", "cpu", corev1.PodPending, 0).obj(),
			wantPhase: troupev1.JobPending,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersNotReady",
				"Running": "False/MasterNotRunning", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "1/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1}, {Name: "cpu", Replicas: 2, Ready: 1, Active: 1}, {Name: "gpu", Replicas: 1},
			},
			wantPods:  troupev1.PodPhaseCounts{Pending: 1},
			wantStart: &t0,
		},
		// The pod watch tells pods ready before their Job and StatefulSets count them: the job
		// counts them at once, in the same status write as its Running.
		"pods ready before their controllers count them": {
			obs: func() *Observed {
				master := namedPod("train-master-x", true)
				master.Labels = map[string]string{troupev1.LabelRole: troupev1.RoleMaster}
				o := observe().master(func(j *batchv1.Job) { j.Status.Active = 1 }).workers("cpu", 0).workers("gpu", 0).
					withPods(master, namedPod("train-workerset-cpu-0", true), namedPod("train-workerset-cpu-1", true),
						namedPod("train-workerset-gpu-0", false))
				return o.obj()
			}(),
			wantPhase: troupev1.JobRunning,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersNotReady",
				"Running": "True/MasterRunning", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "2/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1, Active: 1, Ready: 1}, {Name: "cpu", Replicas: 2, Ready: 2, Active: 2}, {Name: "gpu", Replicas: 1, Active: 1},
			},
			wantPods:  troupev1.PodPhaseCounts{Running: 4},
			wantStart: &t0,
		},
		"running with every worker ready": {
			obs:       allReady().obj(),
			wantPhase: troupev1.JobRunning,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "True/AllWorkersReady",
				// A worker restarted: ReplicaFailure says so, though every worker is ready now.
				"Running": "True/MasterRunning", "ReplicaFailure": "True/PodsRestarting",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "3/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1, Ready: 1, Active: 1},
				{Name: "cpu", Replicas: 2, Ready: 2, Active: 2, Restarts: 3},
				{Name: "gpu", Replicas: 1, Ready: 1, Active: 1},
			},
			wantPods:  troupev1.PodPhaseCounts{Running: 4},
			wantStart: &t0,
		},
		"master succeeded: workers released": {
			obs: observe().master(finishedJob(batchv1.JobComplete, "CompletionsReached", "")).
				workers("cpu", 2).workers("gpu", 1).pod("master", "", corev1.PodSucceeded, 0).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersReleased",
				"Running": "False/MasterSucceeded", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended", "Succeeded": "True/MasterSucceeded",
			},
			wantWorkers: "3/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Succeeded: 1}, {Name: "cpu", Ready: 2}, {Name: "gpu", Ready: 1},
			},
			wantPods:       troupev1.PodPhaseCounts{Succeeded: 1},
			wantStart:      &t0,
			wantCompletion: &t1,
		},
		"master pod succeeded, the Job's verdict not in yet and not certain (a deadline): still Running": {
			obs: func() *Observed {
				o := observe().master(func(j *batchv1.Job) {
					runningMaster(j)
					j.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
					j.Status.Active, j.Status.Ready, j.Status.Succeeded = 0, nil, 1
				}).workers("cpu", 2).workers("gpu", 1).withPods(masterPod(masterUID, corev1.PodSucceeded)).obj()
				return o
			}(),
			wantPhase: troupev1.JobRunning,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "True/AllWorkersReady",
				"Running": "True/MasterRunning", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "3/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1, Succeeded: 1}, {Name: "cpu", Replicas: 2, Ready: 2}, {Name: "gpu", Replicas: 1, Ready: 1},
			},
			wantPods:  troupev1.PodPhaseCounts{Succeeded: 1},
			wantStart: &t0,
		},
		"master failed: the Job's reason is the job's": {
			obs: observe().master(finishedJob(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")).
				workers("cpu", 0).workers("gpu", 0).obj(),
			wantPhase: troupev1.JobFailed,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersReleased",
				"Running": "False/MasterFailed", "ReplicaFailure": "True/PodsFailed",
				"Suspended": "False/JobNotSuspended", "Failed": "True/BackoffLimitExceeded",
			},
			wantWorkers: "0/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Failed: 4}, {Name: "cpu"}, {Name: "gpu"},
			},
			wantStart:      &t0,
			wantCompletion: &t1,
		},
		"clean pod policy None keeps workers after the master": {
			spec: func(s *Spec) { s.RunPolicy.CleanPodPolicy = ptr.To(troupev1.CleanPodPolicyNone) },
			obs: observe().master(finishedJob(batchv1.JobComplete, "CompletionsReached", "")).
				workers("cpu", 2).workers("gpu", 1).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "True/AllWorkersReady",
				"Running": "False/MasterSucceeded", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended", "Succeeded": "True/MasterSucceeded",
			},
			wantWorkers: "3/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Succeeded: 1}, {Name: "cpu", Replicas: 2, Ready: 2}, {Name: "gpu", Replicas: 1, Ready: 1},
			},
			wantStart:      &t0,
			wantCompletion: &t1,
		},
		// The workers' pods ended with the job (torch workers run to completion) and are kept:
		// the job waits for none of them any more, and says so.
		"a job that ended with its workers' pods kept waits for no worker": {
			spec: func(s *Spec) { s.RunPolicy.CleanPodPolicy = ptr.To(troupev1.CleanPodPolicyNone) },
			obs: observe().master(finishedJob(batchv1.JobComplete, "CompletionsReached", "")).
				workers("cpu", 0).workers("gpu", 1).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/Succeeded",
				"Running": "False/MasterSucceeded", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended", "Succeeded": "True/MasterSucceeded",
			},
			wantWorkers: "1/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Succeeded: 1}, {Name: "cpu", Replicas: 2}, {Name: "gpu", Replicas: 1, Ready: 1},
			},
			wantStart:      &t0,
			wantCompletion: &t1,
		},
		"suspended": {
			spec:      func(s *Spec) { s.RunPolicy.Suspend = ptr.To(true) },
			obs:       observe().master(nil).workers("cpu", 0).workers("gpu", 0).obj(),
			wantPhase: troupev1.JobSuspended,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/JobSuspended",
				"Running": "False/JobSuspended", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "True/JobSuspended",
			},
			wantWorkers:  "0/3",
			wantReplicas: []troupev1.ReplicaStatus{{Name: "master"}, {Name: "cpu"}, {Name: "gpu"}},
		},
		"a child's name is taken": {
			obs: func() *Observed {
				o := observe().workers("cpu", 0).workers("gpu", 0).obj()
				o.Conflicts = []childRef{{"Job", "train-master"}}
				return o
			}(),
			wantPhase: troupev1.JobPending,
			wantConditions: map[string]string{
				"Initialized": "False/ChildNameConflict", "WorkersReady": "False/WorkersNotReady",
				"Running": "False/MasterNotRunning", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended",
			},
			wantWorkers: "0/3",
			wantReplicas: []troupev1.ReplicaStatus{
				{Name: "master", Replicas: 1}, {Name: "cpu", Replicas: 2}, {Name: "gpu", Replicas: 1},
			},
		},
		"finished stays finished when the master Job is gone": {
			prev: troupev1.JobStatus{
				Phase: troupev1.JobSucceeded, StartTime: &earlier, CompletionTime: &t1,
				Conditions: []metav1.Condition{
					{Type: "Initialized", Status: "True", Reason: "ChildrenCreated", LastTransitionTime: earlier},
					{Type: "Succeeded", Status: "True", Reason: "MasterSucceeded", LastTransitionTime: t1},
				},
			},
			obs:       observe().workers("cpu", 0).workers("gpu", 0).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersReleased",
				"Running": "False/MasterSucceeded", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended", "Succeeded": "True/MasterSucceeded",
			},
			wantWorkers:    "0/3",
			wantReplicas:   []troupev1.ReplicaStatus{{Name: "master", Replicas: 1}, {Name: "cpu"}, {Name: "gpu"}},
			wantStart:      &earlier,
			wantCompletion: &t1,
		},
		// The scale-down after the end kills the workers; a shell killed so ends Failed.
		"a released worker that ends Failed is no failure of the finished job": {
			prev: troupev1.JobStatus{
				Phase: troupev1.JobSucceeded, StartTime: &earlier, CompletionTime: &t1,
				Conditions: []metav1.Condition{
					{Type: "Initialized", Status: "True", Reason: "ChildrenCreated", LastTransitionTime: earlier},
					{Type: "ReplicaFailure", Status: "False", Reason: "NoPodFailures", LastTransitionTime: earlier},
					{Type: "Succeeded", Status: "True", Reason: "MasterSucceeded", LastTransitionTime: t1},
				},
			},
			obs: observe().master(finishedJob(batchv1.JobComplete, "", "")).workers("cpu", 0).workers("gpu", 0).
				pod(troupev1.RoleWorker, "cpu", corev1.PodFailed, 0).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Initialized": "True/ChildrenCreated", "WorkersReady": "False/WorkersReleased",
				"Running": "False/MasterSucceeded", "ReplicaFailure": "False/NoPodFailures",
				"Suspended": "False/JobNotSuspended", "Succeeded": "True/MasterSucceeded",
			},
			wantWorkers:    "0/3",
			wantReplicas:   []troupev1.ReplicaStatus{{Name: "master", Succeeded: 1}, {Name: "cpu", Failed: 1}, {Name: "gpu"}},
			wantPods:       troupev1.PodPhaseCounts{Failed: 1},
			wantStart:      &earlier,
			wantCompletion: &t1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			if tc.spec != nil {
				tc.spec(s)
			}
			got := computeStatus(s, tc.obs, &tc.prev, genOfJob, now)
			if got.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", got.Phase, tc.wantPhase)
			}
			// The seeds' conditions (Paused, Completed, Complete) are status_runmode_test.go's.
			if diff := cmp.Diff(tc.wantConditions, conditionSummary(withoutSeedConditions(got.Conditions))); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.Workers != tc.wantWorkers {
				t.Errorf("workers = %q, want %q", got.Workers, tc.wantWorkers)
			}
			if diff := cmp.Diff(tc.wantReplicas, got.ReplicaStatuses); diff != "" {
				t.Errorf("replica statuses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPods, got.Pods); diff != "" {
				t.Errorf("pod phases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStart, got.StartTime); diff != "" {
				t.Errorf("startTime (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCompletion, got.CompletionTime); diff != "" {
				t.Errorf("completionTime (-want +got):\n%s", diff)
			}
			if got.ObservedGeneration != genOfJob {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, genOfJob)
			}
		})
	}
}

func TestComputeStatusMessages(t *testing.T) {
	s := testSpec()
	o := observe().master(nil).workers("cpu", 1).workers("gpu", 1).obj()
	o.setPods([]corev1.Pod{
		namedPod("train-workerset-cpu-0", true), namedPod("train-workerset-cpu-1", false), namedPod("train-workerset-gpu-0", true),
	})
	got := computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	if c := meta.FindStatusCondition(got.Conditions, "WorkersReady"); c == nil ||
		c.Message != "waiting for workers: cpu: 1/2 ready; hosts not ready: train-workerset-cpu-1.train.ml.svc" {
		t.Errorf("WorkersReady = %+v, want the set still missing a worker and its host name", c)
	}

	o = observe().master(finishedJob(batchv1.JobFailed, "PodFailurePolicy", "Container troupe-wait for pod ml/train-master-x failed with exit code 3 matching FailJob rule at index 0")).obj()
	launcher := namedPod("train-master-x", false)
	launcher.Labels[troupev1.LabelRole] = troupev1.RoleMaster
	launcher.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "troupe-wait", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Message: "hosts still unreachable after 5m0s: a.train.ml.svc\n"}}}}
	o.setPods([]corev1.Pod{launcher})
	got = computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	if c := meta.FindStatusCondition(got.Conditions, "Failed"); c == nil || c.Reason != "PodFailurePolicy" ||
		!strings.HasSuffix(c.Message, "; init container troupe-wait: hosts still unreachable after 5m0s: a.train.ml.svc") {
		t.Errorf("Failed = %+v, want the wait's message naming the missing host", c)
	}

	o = observe().master(finishedJob(batchv1.JobFailed, "DeadlineExceeded", "Job was active longer than specified deadline")).obj()
	got = computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	if c := meta.FindStatusCondition(got.Conditions, "Failed"); c == nil ||
		c.Message != "the master failed: Job was active longer than specified deadline" {
		t.Errorf("Failed = %+v, want the master Job's message", c)
	}

	o = observe().obj()
	o.Conflicts = []childRef{{"Service", "train"}, {"ConfigMap", "train-mpi"}}
	got = computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	want := "objects with the names of this job's children exist and are not owned by it; delete or rename them: Service train, ConfigMap train-mpi"
	if c := meta.FindStatusCondition(got.Conditions, "Initialized"); c == nil || c.Message != want {
		t.Errorf("Initialized = %+v, want message %q", c, want)
	}
}

// A condition whose status does not change keeps its transition time, so "kubectl describe"
// tells since when a state holds.
func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	s := testSpec()
	o := observe().master(nil).workers("cpu", 2).workers("gpu", 1).obj()
	first := computeStatus(s, o, &troupev1.JobStatus{}, 1, t1)
	second := computeStatus(s, o, &first, 1, now)
	if diff := cmp.Diff(first, second, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("recomputing an unchanged job changed its status (-first +second):\n%s", diff)
	}
	ready := meta.FindStatusCondition(second.Conditions, "WorkersReady")
	if ready == nil || !ready.LastTransitionTime.Equal(&t1) {
		t.Errorf("WorkersReady transition time = %v, want %v", ready, t1)
	}
}

func TestWorkersReleased(t *testing.T) {
	tests := []struct {
		policy    *troupev1.CleanPodPolicy
		on        *troupev1.CleanPodPolicyOn
		suspend   bool
		outcome   troupev1.JobPhase
		wantScale bool
	}{
		{nil, nil, false, "", false},
		{nil, nil, false, troupev1.JobSucceeded, true},
		{nil, nil, false, troupev1.JobFailed, true},
		{ptr.To(troupev1.CleanPodPolicyAll), nil, false, troupev1.JobSucceeded, true},
		{ptr.To(troupev1.CleanPodPolicyNone), nil, false, troupev1.JobSucceeded, false},
		{nil, nil, true, "", true},
		// kube-openmpi's autoScaleDownWorkers: only a success releases the workers.
		{nil, ptr.To(troupev1.CleanPodPolicyOnSucceeded), false, troupev1.JobSucceeded, true},
		{nil, ptr.To(troupev1.CleanPodPolicyOnSucceeded), false, troupev1.JobFailed, false},
		{ptr.To(troupev1.CleanPodPolicyAll), ptr.To(troupev1.CleanPodPolicyOnSucceeded), false, troupev1.JobFailed, false},
		{nil, ptr.To(troupev1.CleanPodPolicyOnFinished), false, troupev1.JobFailed, true},
	}
	for _, tc := range tests {
		s := testSpec()
		s.RunPolicy.CleanPodPolicy = tc.policy
		s.RunPolicy.CleanPodPolicyOn = tc.on
		s.RunPolicy.Suspend = ptr.To(tc.suspend)
		if got := WorkersReleased(s, tc.outcome); got != tc.wantScale {
			t.Errorf("policy %v on %v suspend %v outcome %q: released = %v, want %v",
				ptr.Deref(tc.policy, ""), ptr.Deref(tc.on, ""), tc.suspend, tc.outcome, got, tc.wantScale)
		}
	}
}

// masterPods are the master's pods among pods, as the observation splits them.
func masterPods(pods ...corev1.Pod) []*corev1.Pod {
	var o Observed
	o.setPods(pods)
	return o.MasterPods
}

// The scale subresource's count of workers moves with the pods the watch shows, not a status
// write later with their StatefulSets' counts: up as pods appear, and, once the workers are
// released, down as they go.
func TestWorkerScaleFromPods(t *testing.T) {
	s := testSpec()
	deleting := namedPod("train-workerset-cpu-1", true)
	deleting.DeletionTimestamp = &t1
	tests := map[string]struct {
		obs      *Observed
		released bool
		want     int32
	}{
		"pods before their StatefulSets count them": {
			obs:  observe().workers("cpu", 0).withPods(namedPod("train-workerset-cpu-0", false), namedPod("train-workerset-cpu-1", true)).obj(),
			want: 2,
		},
		"the StatefulSets' count while the watch has not seen the pods": {
			obs: func() *Observed {
				o := observe().workers("cpu", 0).obj()
				o.StatefulSets["cpu"].Status.Replicas = 2
				return o
			}(),
			want: 2,
		},
		"released: the pods alone": {
			obs: func() *Observed {
				o := observe().workers("cpu", 0).withPods(namedPod("train-workerset-cpu-0", true), deleting).obj()
				o.StatefulSets["cpu"].Status.Replicas = 2
				return o
			}(),
			released: true,
			want:     1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got, _ := workerScale(s, tc.obs, tc.released); got != tc.want {
				t.Errorf("workerReplicas %d, want %d", got, tc.want)
			}
		})
	}
}
