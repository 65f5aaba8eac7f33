package engine

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func claimSpec(size string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}
}

// claimOf is the claim a pod template's volume name is backed by, or "".
func claimOf(tmpl *corev1.PodTemplateSpec, name string) string {
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == name && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// runPolicy.storage: a StatefulSet set gets its claim templates as volumeClaimTemplates (kept
// when scaled down, deleted with it unless retained) and no volume of the same name of its
// own; a set of Jobs gets one claim per index, mounted in that index's Job; shared claims are
// mounted in every pod; the engine builds the claims it makes itself, owned by the job unless
// retained.
func TestStorageClaims(t *testing.T) {
	for _, retention := range []troupev1.ClaimRetention{troupev1.ClaimRetentionDelete, troupev1.ClaimRetentionRetain} {
		s := testSpec()
		s.WorkerSets[1].RunsToCompletion = true
		s.WorkerSets[1].Replicas = 2
		s.WorkerSets[0].Template.Spec.Volumes = []corev1.Volume{{Name: "ckpt", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.RunPolicy.Storage = &troupev1.Storage{
			ClaimTemplates: []troupev1.WorkerClaimTemplate{{Name: "ckpt", Spec: claimSpec("1Gi")}},
			SharedClaims:   []troupev1.SharedClaim{{Name: "data", Spec: claimSpec("5Gi")}},
			Retention:      ptr.To(retention),
		}
		sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
		wantDeleted := appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		if retention == troupev1.ClaimRetentionRetain {
			wantDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		}
		if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "ckpt" ||
			sts.Spec.PersistentVolumeClaimRetentionPolicy == nil || sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != wantDeleted ||
			sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			t.Errorf("%s: StatefulSet claims %+v, retention %+v", retention, sts.Spec.VolumeClaimTemplates, sts.Spec.PersistentVolumeClaimRetentionPolicy)
		}
		if l := sts.Spec.VolumeClaimTemplates[0].Labels; l[troupev1.LabelManagedBy] != troupev1.ManagedByTroupe || l[troupev1.LabelJobUID] != "uid-1" {
			t.Errorf("%s: the StatefulSet's claims are labelled %v: the cache would not hold them, and a job mounting one would not be refused", retention, l)
		}
		if slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ckpt" }) {
			t.Errorf("%s: the StatefulSet's template keeps its own volume ckpt, which the claim replaces", retention)
		}
		if got := claimOf(&sts.Spec.Template, "data"); got != "train-data" {
			t.Errorf("%s: worker volume data is claim %q, want train-data", retention, got)
		}
		jobs := BuildWorkerJobs(s, &s.WorkerSets[1], false)
		for i, j := range jobs {
			want := "ckpt-train-workerset-gpu-" + string(rune('0'+i))
			if got := claimOf(&j.Spec.Template, "ckpt"); got != want || claimOf(&j.Spec.Template, "data") != "train-data" {
				t.Errorf("%s: Job %s mounts ckpt %q, data %q; want %s and train-data", retention, j.Name, got, claimOf(&j.Spec.Template, "data"), want)
			}
		}
		master := BuildMasterJob(s)
		if got := claimOf(&master.Spec.Template, "data"); got != "train-data" {
			t.Errorf("%s: master volume data is claim %q", retention, got)
		}
		var names []string
		for _, c := range buildClaims(s) {
			names = append(names, c.Name)
			if owned := len(c.OwnerReferences) == 1; owned != (retention == troupev1.ClaimRetentionDelete) {
				t.Errorf("%s: claim %s has owners %v", retention, c.Name, c.OwnerReferences)
			}
			if c.Labels[troupev1.LabelManagedBy] != troupev1.ManagedByTroupe || c.Labels[troupev1.LabelJobUID] != "uid-1" {
				t.Errorf("%s: claim %s labels %v: the cache would not hold it", retention, c.Name, c.Labels)
			}
		}
		if want := []string{"train-data", "ckpt-train-workerset-gpu-0", "ckpt-train-workerset-gpu-1"}; !slices.Equal(names, want) {
			t.Errorf("%s: claims %v, want %v", retention, names, want)
		}
	}
}

// A job without storage has no claim and its children are as before.
func TestNoStorageNoClaims(t *testing.T) {
	s := testSpec()
	if c := buildClaims(s); c != nil {
		t.Errorf("claims %v", c)
	}
	sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	if sts.Spec.VolumeClaimTemplates != nil || sts.Spec.PersistentVolumeClaimRetentionPolicy != nil {
		t.Errorf("StatefulSet %+v", sts.Spec)
	}
}

// An existing claim of a name the job would make is its to mount only if troupe's and labelled
// with its UID, or retained (no owner) by an earlier job of the same kind and name.
func TestClaimIsTheJobs(t *testing.T) {
	retained := &Spec{Name: "train", NameLabel: "pytorchjob.troupe.dev/name", Owner: metav1.OwnerReference{UID: "uid-now"},
		RunPolicy: troupev1.RunPolicy{Storage: &troupev1.Storage{Retention: ptr.To(troupev1.ClaimRetentionRetain)}}}
	deleted := *retained
	deleted.RunPolicy.Storage = &troupev1.Storage{}
	claim := func(labels map[string]string, owned bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "ckpt-train-worker-0", Labels: labels}}
		if owned {
			c.OwnerReferences = []metav1.OwnerReference{{UID: "uid-before", Controller: ptr.To(true)}}
		}
		return c
	}
	troupes := func(uid, name string) map[string]string {
		return map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: uid, "pytorchjob.troupe.dev/name": name}
	}
	for name, tc := range map[string]struct {
		s     *Spec
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		"the job's own":                              {retained, claim(troupes("uid-now", "train"), false), true},
		"retained by an earlier job of the name":     {retained, claim(troupes("uid-before", "train"), false), true},
		"an earlier job's, not retained by this one": {&deleted, claim(troupes("uid-before", "train"), false), false},
		"another job's":                              {retained, claim(troupes("uid-other", "other"), false), false},
		"an earlier job's still owned by it":         {retained, claim(troupes("uid-before", "train"), true), false},
		"a tenant's, unlabelled":                     {retained, claim(nil, false), false},
		"a tenant's, labelled like the job's but not troupe's": {retained,
			claim(map[string]string{troupev1.LabelJobUID: "uid-now", "pytorchjob.troupe.dev/name": "train"}, false), false},
	} {
		if got := claimIsTheJobs(tc.s, tc.claim); got != tc.want {
			t.Errorf("%s: claimIsTheJobs = %v, want %v", name, got, tc.want)
		}
	}
}
