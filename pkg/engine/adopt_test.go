package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A worker StatefulSet whose owner reference was removed by hand still carries the job's UID
// label: the next pass gives it back its owner (same object, no second one) and the job is not
// reported as conflicting with its own child. Another job's orphan, or an object without the
// label, stays a conflict and is not touched.
func TestOrphanedChildIsAdopted(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.reconcile()
	h.podsRun()
	sts := h.workers()
	uid := sts.UID
	sts.OwnerReferences = nil
	if err := h.c.Update(h.ctx, sts); err != nil {
		t.Fatal(err)
	}

	// The observation finds the orphan the job's, and writes nothing: act adopts it.
	var job troupev1.ChainerJob
	if err := h.c.Get(h.ctx, h.key, &job); err != nil {
		t.Fatal(err)
	}
	spec, err := Describe(h.r.adapter, h.r.gvk, &job)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := h.r.observe(h.ctx, &job, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Orphans) != 1 || obs.Orphans[0].cur.GetName() != sts.Name || len(obs.Conflicts) > 0 {
		t.Errorf("observed orphans %v, conflicts %v; want the StatefulSet an orphan of the job's", obs.Orphans, obs.Conflicts)
	}
	if owners := h.workers().OwnerReferences; len(owners) != 0 {
		t.Errorf("the observation wrote the owner reference %v; act adopts", owners)
	}

	st := h.reconcile()
	got := h.workers()
	if got.UID != uid {
		t.Errorf("StatefulSet UID %s, want the same object %s", got.UID, uid)
	}
	if c := metav1.GetControllerOf(got); c == nil || c.UID != "uid-1" || c.Kind != "ChainerJob" {
		t.Errorf("controller of the orphaned StatefulSet after a pass: %+v, want the job", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized); c == nil || c.Reason == troupev1.ReasonChildConflict {
		t.Errorf("Initialized = %+v, want no name conflict", c)
	}
	if e := h.event(troupev1.EventAdopted); e == "" {
		t.Error("no Adopted event")
	}

	// Another job's UID in the label: a conflict, left as it is.
	sts = h.workers()
	sts.OwnerReferences = nil
	sts.Labels[troupev1.LabelJobUID] = "uid-of-another-job"
	if err := h.c.Update(h.ctx, sts); err != nil {
		t.Fatal(err)
	}
	rv := h.workers().ResourceVersion
	st = h.reconcile()
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized); c == nil || c.Reason != troupev1.ReasonChildConflict {
		t.Errorf("Initialized = %+v, want ChildNameConflict for another job's object", c)
	}
	if got := h.workers(); got.ResourceVersion != rv || len(got.OwnerReferences) != 0 {
		t.Errorf("another job's orphan was changed: owners %+v", got.OwnerReferences)
	}
}
