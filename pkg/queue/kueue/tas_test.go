package kueue

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func TestTopologyRequest(t *testing.T) {
	rack, block := "example.com/rack", "example.com/block"
	tests := []struct {
		name        string
		annotations map[string]string
		indexLabel  string
		want        *kueuev1.PodSetTopologyRequest
		wantErr     string
	}{
		{name: "nothing asked, pods not numbered"},
		{name: "pods numbered only", indexLabel: "apps.kubernetes.io/pod-index",
			want: &kueuev1.PodSetTopologyRequest{PodIndexLabel: ptr.To("apps.kubernetes.io/pod-index")}},
		{name: "required", annotations: map[string]string{kueuev1.PodSetRequiredTopologyAnnotation: rack}, indexLabel: "i",
			want: &kueuev1.PodSetTopologyRequest{Required: &rack, PodIndexLabel: ptr.To("i")}},
		{name: "preferred", annotations: map[string]string{kueuev1.PodSetPreferredTopologyAnnotation: block},
			want: &kueuev1.PodSetTopologyRequest{Preferred: &block}},
		{name: "unconstrained", annotations: map[string]string{kueuev1.PodSetUnconstrainedTopologyAnnotation: "true"},
			want: &kueuev1.PodSetTopologyRequest{Unconstrained: ptr.To(true)}},
		{name: "slices of 4 in a rack", annotations: map[string]string{kueuev1.PodSetSliceRequiredTopologyAnnotation: rack, kueuev1.PodSetSliceSizeAnnotation: "4"},
			want: &kueuev1.PodSetTopologyRequest{PodSetSliceRequiredTopology: &rack, PodSetSliceSize: ptr.To[int32](4)}},
		{name: "unconstrained not a boolean", annotations: map[string]string{kueuev1.PodSetUnconstrainedTopologyAnnotation: "yes"},
			wantErr: `"yes" is not a boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TopologyRequest(tc.annotations, tc.indexLabel)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

type indexedBackend struct{ engine.Backend }

func (indexedBackend) PodIndexLabel() string { return "training.kubeflow.org/replica-index" }

// The Workload asks TAS for what each template's annotations ask, and numbers each worker
// set's pods by the label that carries their index: a StatefulSet's pod index, or the
// backend's label for a set of one batch Job per pod. The master, one pod, is not numbered.
func TestBuildWorkloadTopologyRequests(t *testing.T) {
	job := chainerJob()
	s := spec(job)
	s.Master.Template.Annotations = map[string]string{kueuev1.PodSetRequiredTopologyAnnotation: "example.com/rack"}
	s.WorkerSets[0].Template.Annotations = map[string]string{kueuev1.PodSetPreferredTopologyAnnotation: "example.com/block"}
	s.WorkerSets[1].RunsToCompletion = true
	s.Backend = indexedBackend{}
	wl, err := BuildWorkload(s, job.GroupVersionKind(), job.PodSets(), "q", Priority{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*kueuev1.PodSetTopologyRequest{}
	for _, ps := range wl.Spec.PodSets {
		got[string(ps.Name)] = ps.TopologyRequest
	}
	want := map[string]*kueuev1.PodSetTopologyRequest{
		"master": {Required: ptr.To("example.com/rack")},
		"a":      {Preferred: ptr.To("example.com/block"), PodIndexLabel: ptr.To("apps.kubernetes.io/pod-index")},
		"b":      {PodIndexLabel: ptr.To("training.kubeflow.org/replica-index")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("topology requests (-want +got):\n%s", diff)
	}
}

// admittedByTAS is the job's Workload admitted with a topology assignment for every pod set
// but b, and an admission check whose podSetUpdates ask more of pod set a.
func admittedByTAS(t *testing.T, job *troupev1.ChainerJob) *kueuev1.Workload {
	t.Helper()
	s := spec(job)
	s.WorkerSets[0].Template.Annotations = map[string]string{kueuev1.PodSetRequiredTopologyAnnotation: "example.com/rack"}
	job.Spec.WorkerSets["a"] = troupev1.ChainerWorkerSet{Replicas: ptr.To[int32](2), Template: s.WorkerSets[0].Template}
	wl, err := BuildWorkload(s, job.GroupVersionKind(), job.PodSets(), "q", Priority{})
	if err != nil {
		t.Fatal(err)
	}
	ta := &kueuev1.TopologyAssignment{Levels: []string{corev1.LabelHostname}}
	cpu := map[corev1.ResourceName]kueuev1.ResourceFlavorReference{"cpu": "tas"}
	wl.Status.Admission = &kueuev1.Admission{ClusterQueue: "cq", PodSetAssignments: []kueuev1.PodSetAssignment{
		{Name: "master", Flavors: cpu, TopologyAssignment: ta},
		{Name: "a", Flavors: cpu, TopologyAssignment: ta},
		{Name: "b", Flavors: cpu},
	}}
	wl.Status.AdmissionChecks = []kueuev1.AdmissionCheckState{{
		Name: "prov", State: kueuev1.CheckStateReady,
		PodSetUpdates: []kueuev1.PodSetUpdate{{
			Name:         "a",
			Annotations:  map[string]string{"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"},
			NodeSelector: map[string]string{"pool": "new"},
			Tolerations:  []corev1.Toleration{{Key: "new", Operator: corev1.TolerationOpExists}},
		}},
	}}
	return wl
}

// Under TAS each placed pod set's pods carry the marks Kueue's topology ungater selects them
// by and its scheduling gate (with the unconstrained annotation when the pod set asked no
// level, or the ungater ignores its pods); an admission check's podSetUpdates are added; and
// suspending puts every template back as written.
func TestTASAndAdmissionCheckPlacement(t *testing.T) {
	job := chainerJob()
	wl := admittedByTAS(t, job)
	written := job.DeepCopy()
	flavors := map[string]*kueuev1.ResourceFlavor{"tas": {Spec: kueuev1.ResourceFlavorSpec{NodeLabels: map[string]string{"tier": "tas"}}}}
	p, err := Placements(wl, flavors)
	if err != nil {
		t.Fatal(err)
	}
	ApplyPlacements(job, p)
	gate := []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
	want := map[string]corev1.PodTemplateSpec{
		"master": {
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"kueue.x-k8s.io/podset": "master"},
				Annotations: map[string]string{"kueue.x-k8s.io/workload": wl.Name, "kueue.x-k8s.io/podset-unconstrained-topology": "true"},
			},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "a", "tier": "tas"}, SchedulingGates: gate},
		},
		"a": {
			ObjectMeta: metav1.ObjectMeta{
				Labels: map[string]string{"kueue.x-k8s.io/podset": "a"},
				Annotations: map[string]string{"kueue.x-k8s.io/workload": wl.Name, "kueue.x-k8s.io/podset-required-topology": "example.com/rack",
					"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"},
			},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "tas", "pool": "new"}, SchedulingGates: gate,
				Tolerations: []corev1.Toleration{{Key: "new", Operator: corev1.TolerationOpExists}}},
		},
		"b": {Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "tas"}}},
	}
	got := map[string]corev1.PodTemplateSpec{"master": placed(job.Spec.Master.Template)}
	for name, ws := range job.Spec.WorkerSets {
		got[name] = placed(ws.Template)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placed templates (-want +got):\n%s", diff)
	}

	if !RestorePlacements(job, wl) {
		t.Fatal("RestorePlacements changed nothing")
	}
	if diff := cmp.Diff(written.Spec, job.Spec); diff != "" {
		t.Errorf("restored spec differs from the spec as written (-want +got):\n%s", diff)
	}
}

// placed is what a placement writes of a template.
func placed(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations},
		Spec:       corev1.PodSpec{NodeSelector: t.Spec.NodeSelector, Tolerations: t.Spec.Tolerations, SchedulingGates: t.Spec.SchedulingGates},
	}
}

// An admission check asking a node label the flavor sets to another value starts nothing and
// names the check, the pod set and the key.
func TestAdmissionCheckConflict(t *testing.T) {
	job := chainerJob()
	wl := admittedByTAS(t, job)
	flavors := map[string]*kueuev1.ResourceFlavor{"tas": {Spec: kueuev1.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "old"}}}}
	_, err := Placements(wl, flavors)
	if err == nil || !strings.Contains(err.Error(), "admission check prov asks pod set a for nodeSelector pool=new, which is already old") {
		t.Errorf("error %v, want one naming the check, the pod set and the key", err)
	}
}

// A job whose quota is reserved says which admission checks it waits for, and what their
// controllers say.
func TestAdmittedConditionWaitingForChecks(t *testing.T) {
	wl := &kueuev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl"}}
	wl.Status.Conditions = []metav1.Condition{{Type: kueuev1.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"}}
	wl.Status.Admission = &kueuev1.Admission{ClusterQueue: "cq"}
	wl.Status.AdmissionChecks = []kueuev1.AdmissionCheckState{
		{Name: "ready-one", State: kueuev1.CheckStateReady, Message: "done"},
		{Name: "prov", State: kueuev1.CheckStatePending, Message: "Waiting for resources. Currently there are not enough resources available"},
	}
	want := metav1.Condition{Type: "Admitted", Status: "False", Reason: "Pending",
		Message: "waiting in LocalQueue q for admission checks (quota reserved in ClusterQueue cq, Workload wl): " +
			"prov (Pending): Waiting for resources. Currently there are not enough resources available"}
	if diff := cmp.Diff(want, AdmittedCondition(wl, "q")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
