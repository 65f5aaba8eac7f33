package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// asServed is what the API server returns for a child we created: our object plus defaults.
func asServed(sts *appsv1.StatefulSet) *appsv1.StatefulSet {
	cur := sts.DeepCopy()
	cur.ResourceVersion = "7"
	cur.Labels["added-by-someone"] = "x"
	cur.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	cur.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	cur.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	return cur
}

func TestRestore(t *testing.T) {
	s := testSpec()
	want := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)

	t.Run("server defaults alone cause no write", func(t *testing.T) {
		cur := asServed(want)
		if restore(cur, want) {
			t.Errorf("restore reported a change for an unchanged child")
		}
	})

	t.Run("replicas changed by hand are put back, the rest of the object kept", func(t *testing.T) {
		cur := asServed(want)
		cur.Spec.Replicas = ptr.To[int32](5)
		if !restore(cur, want) {
			t.Fatalf("restore did not notice the scaled StatefulSet")
		}
		if *cur.Spec.Replicas != 2 {
			t.Errorf("replicas = %d, want 2", *cur.Spec.Replicas)
		}
		if cur.Labels["added-by-someone"] != "x" || cur.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
			t.Errorf("restore dropped fields it does not manage: %+v", cur.Labels)
		}
	})

	t.Run("a removed label of ours comes back", func(t *testing.T) {
		cur := asServed(want)
		delete(cur.Labels, troupev1.LabelRole)
		if !restore(cur, want) || cur.Labels[troupev1.LabelRole] != troupev1.RoleWorker {
			t.Errorf("role label not restored: %v", cur.Labels)
		}
	})

	t.Run("a new desired template replaces the old one", func(t *testing.T) {
		cur := asServed(want)
		s2 := testSpec()
		s2.WorkerSets[0].Template.Spec.Containers[0].Image = "train:2"
		want2 := BuildWorkerStatefulSet(s2, &s2.WorkerSets[0], false)
		if !restore(cur, want2) {
			t.Fatalf("restore ignored a changed template")
		}
		if diff := cmp.Diff(want2.Spec.Template, cur.Spec.Template); diff != "" {
			t.Errorf("template (-want +got):\n%s", diff)
		}
		if cur.Annotations[troupev1.AnnotationSpecHash] != want2.Annotations[troupev1.AnnotationSpecHash] {
			t.Errorf("spec hash not updated")
		}
	})

	t.Run("master Job: suspend follows the spec", func(t *testing.T) {
		job := BuildMasterJob(s)
		cur := job.DeepCopy()
		s2 := testSpec()
		s2.RunPolicy.Suspend = ptr.To(true)
		if !restore(cur, BuildMasterJob(s2)) || !*cur.Spec.Suspend {
			t.Errorf("suspend not applied: %v", cur.Spec.Suspend)
		}
		if restore(cur, BuildMasterJob(s2)) {
			t.Errorf("a second restore changed the Job again")
		}
	})

	t.Run("service selector put back", func(t *testing.T) {
		svc := BuildService(s)
		cur := svc.DeepCopy()
		cur.Spec.Selector = map[string]string{"app": "other"}
		cur.Spec.ClusterIP = "None"
		if !restore(cur, svc) || cur.Spec.Selector[troupev1.LabelJobUID] != "uid-1" {
			t.Errorf("selector not restored: %v", cur.Spec.Selector)
		}
	})
}

// testGang is a gang provider with one child of its own.
type testGang struct{}

func (testGang) Objects(s *Spec) []client.Object {
	return []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-gang"}}}
}
func (testGang) DecoratePod(*Spec, *corev1.PodTemplateSpec) {}
func (testGang) Restore(_, _ client.Object) bool            { return false }
func (testGang) Condition(client.Object, []corev1.Pod) metav1.Condition {
	return metav1.Condition{Type: "GangScheduled", Status: metav1.ConditionTrue, Reason: "Test"}
}

// observe looks children up by childIdentities and syncChildren creates Children: a child in
// one list but not the other would never be created, or never be seen.
func TestChildIdentitiesAreChildren(t *testing.T) {
	variants := map[string]func(s *Spec){
		"workers only": func(*Spec) {},
		"a backend":    func(s *Spec) { s.Backend = envBackend{} },
		"a gang":       func(s *Spec) { s.Backend, s.Gang = envBackend{}, testGang{} },
		"a disruption budget": func(s *Spec) {
			s.SchedulingPolicy.PodDisruptionBudget = &troupev1.PodDisruptionBudgetPolicy{Enabled: true}
		},
		"no network policy": func(s *Spec) { s.RunPolicy.NetworkPolicy = &troupev1.NetworkPolicyConfig{Enabled: ptr.To(false)} },
		// observe reads a job asking for a pause with the master Job, which decide then deletes.
		"pause asked":                   func(s *Spec) { s.RunMode.Pause = true },
		"a set that runs to completion": func(s *Spec) { s.WorkerSets[1].RunsToCompletion = true },
		"no worker sets, budget": func(s *Spec) {
			s.WorkerSets = nil
			s.SchedulingPolicy.PodDisruptionBudget = &troupev1.PodDisruptionBudgetPolicy{Enabled: true}
		},
	}
	type id struct{ Kind, Namespace, Name string }
	ids := func(objs []client.Object) []id {
		var out []id
		for _, o := range objs {
			out = append(out, id{keyOf(o).Kind, o.GetNamespace(), o.GetName()})
		}
		return out
	}
	for name, edit := range variants {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			edit(s)
			got, gang := childIdentities(s)
			for _, released := range []bool{false, true} {
				if diff := cmp.Diff(ids(Children(s, released)), ids(got)); diff != "" {
					t.Errorf("workers released %t (-Children +childIdentities):\n%s", released, diff)
				}
			}
			var wantGang map[childRef]bool
			for _, g := range BuildGangObjects(s) {
				if wantGang == nil {
					wantGang = map[childRef]bool{}
				}
				wantGang[keyOf(g)] = true
			}
			if diff := cmp.Diff(wantGang, gang, cmpopts.EquateEmpty(), cmp.AllowUnexported(childRef{})); diff != "" {
				t.Errorf("gang keys (-want +got):\n%s", diff)
			}
		})
	}
}
