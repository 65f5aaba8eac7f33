package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AllowClaimVolumeSourcesFlag is the operator flag that lets claims of runPolicy.storage name
// the volume they come from (ClaimVolumeSourceErrors).
const AllowClaimVolumeSourcesFlag = "--allow-claim-volume-sources"

// ClaimVolumeSourceErrors refuses every claim of runPolicy.storage (p) that names the volume it
// comes from: spec.volumeName (bind to that PersistentVolume), spec.dataSource or
// spec.dataSourceRef (fill it from a snapshot or another claim). The operator creates these
// claims with its own rights, so such a claim would hand a tenant a volume, a snapshot or a
// populator's data the tenant could not claim itself: the operator would be its confused
// deputy. An operator started with AllowClaimVolumeSourcesFlag lets them through; the webhook
// (on create) and the engine (where the webhook was not asked) both refuse them otherwise.
func ClaimVolumeSourceErrors(p *field.Path, st *Storage) field.ErrorList {
	if st == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range st.ClaimTemplates {
		errs = append(errs, claimSpecVolumeSources(p.Child("claimTemplates").Index(i).Child("spec"), &st.ClaimTemplates[i].Spec)...)
	}
	for i := range st.SharedClaims {
		errs = append(errs, claimSpecVolumeSources(p.Child("sharedClaims").Index(i).Child("spec"), &st.SharedClaims[i].Spec)...)
	}
	return errs
}

// claimVolumeSourceMessage says why a source is refused and what allows it.
const claimVolumeSourceMessage = "the operator creates this claim with its own rights, so it may not name the volume or data it comes from; " +
	"an administrator allows it by starting the operator with " + AllowClaimVolumeSourcesFlag + " (docs/storage.md)"

// claimSpecVolumeSources refuses each source one claim spec names.
func claimSpecVolumeSources(p *field.Path, spec *corev1.PersistentVolumeClaimSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.VolumeName != "" {
		errs = append(errs, field.Forbidden(p.Child("volumeName"), claimVolumeSourceMessage))
	}
	if spec.DataSource != nil {
		errs = append(errs, field.Forbidden(p.Child("dataSource"), claimVolumeSourceMessage))
	}
	if spec.DataSourceRef != nil {
		errs = append(errs, field.Forbidden(p.Child("dataSourceRef"), claimVolumeSourceMessage))
	}
	return errs
}
