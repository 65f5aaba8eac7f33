package webhooks

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// The suffixes the webhook refuses are the ones the backend gives the generated credentials.
func TestCredentialSuffixesAreTheGeneratedNames(t *testing.T) {
	s := &engine.Spec{Name: "b"}
	if got := mpi.SSHSecretName(s); got != "b"+troupev1.GeneratedSecretSuffix {
		t.Errorf("SSH Secret %q does not end in %q", got, troupev1.GeneratedSecretSuffix)
	}
	if got := mpi.ExecAccountName(s); got != "b"+troupev1.GeneratedAccountSuffix {
		t.Errorf("exec ServiceAccount %q does not end in %q", got, troupev1.GeneratedAccountSuffix)
	}
}

// Every place of a pod template that names a Secret or a ServiceAccount is checked, in init
// containers as in main containers; names that merely contain the suffix are fine.
func TestTemplateCredentialRefs(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		ServiceAccountName:       "b-exec",
		DeprecatedServiceAccount: "b-exec",
		ImagePullSecrets:         []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "b-ssh"}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "b-ssh"}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b-ssh"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b-ssh"}}},
			}}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "b-ssh"}}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "b-ssh-keys"}}},
		},
		InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "b-ssh"}, Key: "id_ed25519"}}}}}},
		Containers: []corev1.Container{{Name: "m", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "b-exec"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "b-ssh"}}},
		}}},
	}}
	p := field.NewPath("spec", "worker", "template")
	errs := validateCredentialRefs(field.NewPath("spec"),
		[]troupev1.AppCode{{Name: "app", GitSecretName: "deploy-ssh"}},
		&troupev1.MPILaunch{SSH: &troupev1.SSHConfig{SecretName: "x-ssh"}},
		[]podTemplateAt{{p, &tmpl}})
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	want := []string{
		"spec.worker.template.spec.serviceAccountName",
		"spec.worker.template.spec.serviceAccount",
		"spec.worker.template.spec.imagePullSecrets[1].name",
		"spec.worker.template.spec.volumes[0].secret.secretName",
		"spec.worker.template.spec.volumes[1].projected.sources[1].secret.name",
		"spec.worker.template.spec.volumes[2].csi.nodePublishSecretRef.name",
		"spec.worker.template.spec.initContainers[0].env[0].valueFrom.secretKeyRef.name",
		"spec.worker.template.spec.containers[0].envFrom[1].secretRef.name",
		"spec.ssh.secretName",
		"spec.appCodesToSync[0].gitSecretName",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("refused fields:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
