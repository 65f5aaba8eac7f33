package webhooks

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// validateStorage checks runPolicy.storage: claim templates name worker sets the job has, and
// every claim asks for access modes and a size, which the API server requires of a claim (a
// claim it refuses would leave the pods that mount it pending).
func validateStorage(p *field.Path, st *troupev1.Storage, replicas jobReplicas) field.ErrorList {
	if st == nil {
		return nil
	}
	var errs field.ErrorList
	shared := map[string]bool{}
	for _, c := range st.SharedClaims {
		shared[c.Name] = true
	}
	for i := range st.ClaimTemplates {
		if name := st.ClaimTemplates[i].Name; shared[name] {
			errs = append(errs, field.Invalid(p.Child("claimTemplates").Index(i).Child("name"), name,
				"a claim template and a shared claim must not have one name: each is a volume of the pods"))
		}
	}
	for i := range st.ClaimTemplates {
		t, tp := &st.ClaimTemplates[i], p.Child("claimTemplates").Index(i)
		for j, set := range t.WorkerSets {
			if !slices.Contains(replicas.workers, set) {
				errs = append(errs, field.NotSupported(tp.Child("workerSets").Index(j), set, replicas.workers))
			}
		}
		errs = append(errs, validateClaimSpec(tp.Child("spec"), &t.Spec)...)
	}
	for i := range st.SharedClaims {
		errs = append(errs, validateClaimSpec(p.Child("sharedClaims").Index(i).Child("spec"), &st.SharedClaims[i].Spec)...)
	}
	return errs
}

// validateClaimSpec refuses a claim without access modes or a storage request.
func validateClaimSpec(p *field.Path, spec *corev1.PersistentVolumeClaimSpec) field.ErrorList {
	var errs field.ErrorList
	if len(spec.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "a claim needs at least one access mode (ReadWriteOnce, ReadWriteMany, ...)"))
	}
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(p.Child("resources", "requests").Key(string(corev1.ResourceStorage)), "a claim needs the size it asks for"))
	}
	return errs
}

// ValidateClaimVolumeSources refuses, unless the operator allows them, claims of
// runPolicy.storage that name the volume they come from (troupev1.ClaimVolumeSourceErrors). It
// depends on the operator's setting, not on the job alone, so it runs when a job is created
// only: storage cannot change afterwards (fixedRunPolicyUpdate), and a job admitted while the
// setting was on must stay updatable (scaled, suspended) after it is turned off.
func (o Options) ValidateClaimVolumeSources(rp *troupev1.RunPolicy) field.ErrorList {
	if o.AllowClaimVolumeSources {
		return nil
	}
	return troupev1.ClaimVolumeSourceErrors(field.NewPath("spec", "runPolicy", "storage"), rp.Storage)
}
