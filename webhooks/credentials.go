package webhooks

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// validateCredentialRefs refuses every reference of the job's spec to a name troupe gives a
// job's generated credentials (troupev1.PodSpecCredentialRefs): in each pod template, in
// ssh.secretName and in the repositories' gitSecretName.
func validateCredentialRefs(spec *field.Path, codes []troupev1.AppCode, l *troupev1.MPILaunch, templates []podTemplateAt) field.ErrorList {
	var errs field.ErrorList
	for _, t := range templates {
		errs = append(errs, troupev1.PodSpecCredentialRefs(t.path.Child("spec"), &t.tmpl.Spec)...)
	}
	if l != nil && l.SSH != nil {
		errs = append(errs, troupev1.GeneratedSecretRef(spec.Child("ssh", "secretName"), l.SSH.SecretName)...)
	}
	for i := range codes {
		errs = append(errs, troupev1.GeneratedSecretRef(spec.Child("appCodesToSync").Index(i).Child("gitSecretName"), codes[i].GitSecretName)...)
	}
	return errs
}
