package kueue

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func template(cpu string, nodeSelector map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: nodeSelector,
		Containers: []corev1.Container{{Name: "chainer", Image: "i", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}},
	}}
}

// A ChainerJob with a master and two worker sets, a and b.
func chainerJob() *troupev1.ChainerJob {
	return &troupev1.ChainerJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "troupe.dev/v1alpha1", Kind: "ChainerJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"},
		Spec: troupev1.ChainerJobSpec{
			Master: troupev1.ChainerMaster{Template: template("1", map[string]string{"zone": "a"})},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{
				"b": {Replicas: ptr.To[int32](1), Template: template("4", nil)},
				"a": {Replicas: ptr.To[int32](2), Template: template("2", nil)},
			},
		},
	}
}

func spec(job *troupev1.ChainerJob) *engine.Spec {
	s := &engine.Spec{
		Name: job.Name, Namespace: job.Namespace,
		Owner:  *metav1.NewControllerRef(job, job.GroupVersionKind()),
		Master: engine.Master{JobName: job.Name + "-master", Template: job.Spec.Master.Template},
	}
	for _, name := range job.Spec.WorkerSetNames() {
		ws := job.Spec.WorkerSets[name]
		s.WorkerSets = append(s.WorkerSets, engine.WorkerSet{Name: name, Replicas: *ws.Replicas, Template: ws.Template})
	}
	return s
}

func TestBuildWorkload(t *testing.T) {
	job := chainerJob()
	wl, err := BuildWorkload(spec(job), job.GroupVersionKind(), job.PodSets(), "team-a", Priority{Value: ptr.To[int32](100)})
	if err != nil {
		t.Fatal(err)
	}
	type set struct {
		Name  string
		Count int32
		CPU   string
	}
	var got []set
	for _, ps := range wl.Spec.PodSets {
		got = append(got, set{string(ps.Name), ps.Count, ps.Template.Spec.Containers[0].Resources.Requests.Cpu().String()})
	}
	want := []set{{"master", 1, "1"}, {"a", 2, "2"}, {"b", 1, "4"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if wl.Spec.QueueName != "team-a" || *wl.Spec.Priority != 100 {
		t.Errorf("queue %q priority %d, want team-a and 100", wl.Spec.QueueName, *wl.Spec.Priority)
	}
	owner := metav1.GetControllerOf(wl)
	if owner == nil || owner.Kind != "ChainerJob" || owner.UID != "uid-1" || !*owner.BlockOwnerDeletion {
		t.Errorf("owner %+v, want the ChainerJob, blocking its deletion", owner)
	}
	if diff := cmp.Diff([]string{ResourceInUseFinalizer}, wl.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if wl.Labels[troupev1.LabelManagedBy] != troupev1.ManagedByTroupe || wl.Labels[troupev1.LabelJobUID] != "uid-1" {
		t.Errorf("labels %v: the operator's cache selects its Workloads by managed-by and job UID", wl.Labels)
	}
}

func TestWorkloadName(t *testing.T) {
	gvk := chainerJob().GroupVersionKind()
	a := WorkloadName(gvk, "train", "uid-1")
	if !strings.HasPrefix(a, "chainerjob-train-") || len(a) != len("chainerjob-train-")+5 {
		t.Errorf("name %q, want chainerjob-train-<5 hex>", a)
	}
	if a == WorkloadName(gvk, "train", "uid-2") {
		t.Errorf("a job recreated under the same name must get another Workload")
	}
	mpi := gvk
	mpi.Kind = "MPIJob"
	if strings.TrimPrefix(a, "chainerjob-") == strings.TrimPrefix(WorkloadName(mpi, "train", "uid-1"), "mpijob-") {
		t.Errorf("the hash must depend on the kind")
	}
	if long := WorkloadName(gvk, strings.Repeat("x", 300), "u"); len(long) > 253 {
		t.Errorf("name of %d characters, more than 253", len(long))
	}
}

func TestPlacementsAppliedAndRestored(t *testing.T) {
	job := chainerJob()
	wl, err := BuildWorkload(spec(job), job.GroupVersionKind(), job.PodSets(), "q", Priority{})
	if err != nil {
		t.Fatal(err)
	}
	gpuToleration := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	flavors := map[string]*kueuev1.ResourceFlavor{
		"cpu": {Spec: kueuev1.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "cpu"}}},
		"gpu": {Spec: kueuev1.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{gpuToleration}}},
	}
	adm := &kueuev1.Admission{ClusterQueue: "cq", PodSetAssignments: []kueuev1.PodSetAssignment{
		{Name: "master", Flavors: map[corev1.ResourceName]kueuev1.ResourceFlavorReference{"cpu": "cpu", "memory": "cpu"}},
		{Name: "a", Flavors: map[corev1.ResourceName]kueuev1.ResourceFlavorReference{"cpu": "cpu"}},
		{Name: "b", Flavors: map[corev1.ResourceName]kueuev1.ResourceFlavorReference{"cpu": "gpu"}},
	}}
	admitted := wl.DeepCopy()
	admitted.Status.Admission = adm
	p, err := Placements(admitted, flavors)
	if err != nil {
		t.Fatal(err)
	}
	ApplyPlacements(job, p)
	want := map[string]corev1.PodSpec{
		"master": {NodeSelector: map[string]string{"zone": "a", "pool": "cpu"}},
		"a":      {NodeSelector: map[string]string{"pool": "cpu"}},
		"b":      {NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{gpuToleration}},
	}
	got := map[string]corev1.PodSpec{"master": scheduling(job.Spec.Master.Template)}
	for name, ws := range job.Spec.WorkerSets {
		got[name] = scheduling(ws.Template)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placed templates (-want +got):\n%s", diff)
	}

	if !RestorePlacements(job, wl) {
		t.Fatal("RestorePlacements changed nothing")
	}
	if diff := cmp.Diff(chainerJob().Spec, job.Spec); diff != "" {
		t.Errorf("restored spec differs from the spec as written (-want +got):\n%s", diff)
	}
	if RestorePlacements(job, wl) {
		t.Error("a second RestorePlacements changed something")
	}

	delete(flavors, "gpu")
	if _, err := Placements(admitted, flavors); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("a missing flavor gave %v, want an error naming it", err)
	}
}

func scheduling(t corev1.PodTemplateSpec) corev1.PodSpec {
	return corev1.PodSpec{NodeSelector: t.Spec.NodeSelector, Tolerations: t.Spec.Tolerations}
}

// A launcher the operator generates has no template of its own: only the workers are placed.
func TestGeneratedLauncherFollowsWorkers(t *testing.T) {
	job := &troupev1.MPIJob{Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
		Worker: troupev1.MPIWorker{Template: template("2", nil)},
	}}}
	p := map[string]Placement{"launcher": {NodeSelector: map[string]string{"pool": "x"}}, "worker": {NodeSelector: map[string]string{"pool": "y"}}}
	ApplyPlacements(job, p)
	if got := job.Spec.Worker.Template.Spec.NodeSelector["pool"]; got != "y" {
		t.Errorf("worker nodeSelector pool=%q, want y", got)
	}
	if job.Spec.Launcher != nil {
		t.Errorf("a launcher section appeared: %+v", job.Spec.Launcher)
	}
}

func TestAdmittedCondition(t *testing.T) {
	wl := &kueuev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl"}}
	cond := func(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
	}
	tests := []struct {
		name       string
		wl         *kueuev1.Workload
		conditions []metav1.Condition
		admission  *kueuev1.Admission
		want       metav1.Condition
	}{{
		name: "no Workload yet",
		want: cond("Admitted", "False", "Pending", "queued in LocalQueue q: creating its Workload"),
	}, {
		name: "waiting for quota, with Kueue's reason",
		wl:   wl,
		conditions: []metav1.Condition{cond(kueuev1.WorkloadQuotaReserved, "False", "Pending",
			"couldn't assign flavors to pod set master: insufficient unused quota for cpu in flavor default, 2 more needed")},
		want: cond("Admitted", "False", "Pending",
			"waiting in LocalQueue q for quota (Workload wl): couldn't assign flavors to pod set master: insufficient unused quota for cpu in flavor default, 2 more needed"),
	}, {
		name:       "admitted",
		wl:         wl,
		conditions: []metav1.Condition{cond(kueuev1.WorkloadAdmitted, "True", "Admitted", "")},
		admission:  &kueuev1.Admission{ClusterQueue: "cq"},
		want:       cond("Admitted", "True", "Admitted", "admitted by ClusterQueue cq (LocalQueue q, Workload wl)"),
	}, {
		name: "preempted, still holding its admission",
		wl:   wl,
		conditions: []metav1.Condition{
			cond(kueuev1.WorkloadAdmitted, "True", "Admitted", ""),
			cond(kueuev1.WorkloadEvicted, "True", "Preempted", "Preempted to accommodate a workload due to prioritization in the ClusterQueue"),
		},
		admission: &kueuev1.Admission{ClusterQueue: "cq"},
		want: cond("Admitted", "False", "Preempted",
			"evicted by Kueue (Preempted): Preempted to accommodate a workload due to prioritization in the ClusterQueue; queued in LocalQueue q again"),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w *kueuev1.Workload
			if tc.wl != nil {
				w = tc.wl.DeepCopy()
				w.Status.Conditions, w.Status.Admission = tc.conditions, tc.admission
			}
			if diff := cmp.Diff(tc.want, AdmittedCondition(w, "q")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A Workload made before the job was scaled no longer agrees with it, and says how.
func TestPodSetCountsChange(t *testing.T) {
	job := chainerJob()
	build := func() []kueuev1.PodSet {
		wl, err := BuildWorkload(spec(job), job.GroupVersionKind(), job.PodSets(), "team-a", Priority{})
		if err != nil {
			t.Fatal(err)
		}
		return wl.Spec.PodSets
	}
	before := build()
	if got := PodSetCountsChange(before, build()); got != "" {
		t.Errorf("unchanged job: %q, want no change", got)
	}
	ws := job.Spec.WorkerSets["a"]
	ws.Replicas = ptr.To[int32](3)
	job.Spec.WorkerSets["a"] = ws
	if got := PodSetCountsChange(before, build()); got != "a: 2 -> 3" {
		t.Errorf("worker set a scaled: %q, want a: 2 -> 3", got)
	}
}

// The Workload's PodsReady condition, as Kueue's own integrations write it: not ready until
// admitted and every pod ready; a loss after a start waits for recovery; ready again is
// Recovered.
func TestPodsReadyCondition(t *testing.T) {
	admitted := &kueuev1.Workload{Status: kueuev1.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueuev1.WorkloadAdmitted, Status: metav1.ConditionTrue}}}}
	with := func(c metav1.Condition) *kueuev1.Workload {
		wl := admitted.DeepCopy()
		wl.Status.Conditions = append(wl.Status.Conditions, c)
		return wl
	}
	for _, c := range []struct {
		name   string
		wl     *kueuev1.Workload
		ready  bool
		status metav1.ConditionStatus
		reason string
	}{
		{"not admitted", &kueuev1.Workload{}, true, metav1.ConditionFalse, kueuev1.WorkloadWaitForStart},
		{"admitted, pods starting", admitted, false, metav1.ConditionFalse, kueuev1.WorkloadWaitForStart},
		{"admitted, every pod ready", admitted, true, metav1.ConditionTrue, kueuev1.WorkloadStarted},
		{"a pod lost after the start", with(metav1.Condition{Type: kueuev1.WorkloadPodsReady, Status: metav1.ConditionTrue, Reason: kueuev1.WorkloadStarted}),
			false, metav1.ConditionFalse, kueuev1.WorkloadWaitForRecovery},
		{"recovered", with(metav1.Condition{Type: kueuev1.WorkloadPodsReady, Status: metav1.ConditionFalse, Reason: kueuev1.WorkloadWaitForRecovery}),
			true, metav1.ConditionTrue, kueuev1.WorkloadRecovered},
		{"still started", with(metav1.Condition{Type: kueuev1.WorkloadPodsReady, Status: metav1.ConditionTrue, Reason: kueuev1.WorkloadStarted}),
			true, metav1.ConditionTrue, kueuev1.WorkloadStarted},
	} {
		got := PodsReadyCondition(c.wl, c.ready)
		if got.Status != c.status || got.Reason != c.reason {
			t.Errorf("%s: %s/%s, want %s/%s", c.name, got.Status, got.Reason, c.status, c.reason)
		}
	}
	if PodsReady(&troupev1.JobStatus{ReplicaStatuses: []troupev1.ReplicaStatus{{Name: "master", Replicas: 1, Ready: 1}, {Name: "ws0", Replicas: 2, Ready: 1}}}) {
		t.Error("PodsReady with 1 of 2 workers ready")
	}
	if !PodsReady(&troupev1.JobStatus{ReplicaStatuses: []troupev1.ReplicaStatus{{Name: "master", Replicas: 1, Succeeded: 1}, {Name: "ws0", Replicas: 2, Ready: 2}}}) {
		t.Error("not PodsReady with the master succeeded and every worker ready")
	}
}

// The admission's counts are recorded by pod set name, in the admission's order; a pod set
// without a count is left out.
func TestAdmittedPodSets(t *testing.T) {
	a := &kueuev1.Admission{PodSetAssignments: []kueuev1.PodSetAssignment{
		{Name: "launcher", Count: ptr.To[int32](1)}, {Name: "worker", Count: ptr.To[int32](2)}, {Name: "extra"},
	}}
	if got := AdmittedPodSets(a); got != "launcher=1,worker=2" {
		t.Errorf("AdmittedPodSets = %q, want launcher=1,worker=2", got)
	}
	if got := AdmittedPodSets(nil); got != "" {
		t.Errorf("AdmittedPodSets(nil) = %q, want none", got)
	}
}
