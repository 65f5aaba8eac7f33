package v1alpha1

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// No job may name troupe's generated credentials in its spec: the SSH Secret <job>-ssh (the
// launcher's private key and the workers' host key) and the KubeExec ServiceAccount <job>-exec
// (whose Role may exec into the job's workers). A pod may mount any Secret and run as any
// ServiceAccount of its namespace, so a user who may create jobs, but not exec into pods,
// could otherwise read another job's keys or act with its exec rights.
//
// The rule is on the names' suffixes, not on the jobs that exist, so it needs no lookup and
// has no order problem: job A naming b-ssh is refused whether job B exists yet or not, and
// B's keys, created later, can never reach A's pods. The price is that a Secret of the
// user's whose name ends in -ssh (or a ServiceAccount ending in -exec) cannot be named by a
// job: docs/security.md says so. A job's own generated names are refused too: troupe mounts
// them where they belong, and a ChainerJob and an MPIJob of the same name would share them.
// The admission webhook refuses such a spec, and the engine refuses to run one (it reports
// InvalidSpec and creates nothing), for a job admitted without the webhook.

const (
	// GeneratedSecretSuffix ends the name of every job's SSH Secret (mpi.SSHSecretName).
	GeneratedSecretSuffix = "-ssh"
	// GeneratedAccountSuffix ends the name of every job's KubeExec ServiceAccount
	// (mpi.ExecAccountName).
	GeneratedAccountSuffix = "-exec"
)

// PodSpecCredentialRefs refuses every name a pod spec gives a Secret or a ServiceAccount that is
// a job's generated credential's (GeneratedSecretRef, GeneratedAccountRef): its ServiceAccount,
// Secret volumes and projections, the volume plugins' Secret references, environment and image
// pull Secrets, of init and main containers alike.
func PodSpecCredentialRefs(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, GeneratedAccountRef(p.Child("serviceAccountName"), spec.ServiceAccountName)...)
	errs = append(errs, GeneratedAccountRef(p.Child("serviceAccount"), spec.DeprecatedServiceAccount)...)
	for i, s := range spec.ImagePullSecrets {
		errs = append(errs, GeneratedSecretRef(p.Child("imagePullSecrets").Index(i).Child("name"), s.Name)...)
	}
	for i := range spec.Volumes {
		errs = append(errs, volumeSecretRefs(p.Child("volumes").Index(i), &spec.Volumes[i].VolumeSource)...)
	}
	containers := func(list *field.Path, cs []corev1.Container) {
		for i := range cs {
			cp := list.Index(i)
			for j, e := range cs[i].Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					errs = append(errs, GeneratedSecretRef(cp.Child("env").Index(j).Child("valueFrom", "secretKeyRef", "name"), e.ValueFrom.SecretKeyRef.Name)...)
				}
			}
			for j, e := range cs[i].EnvFrom {
				if e.SecretRef != nil {
					errs = append(errs, GeneratedSecretRef(cp.Child("envFrom").Index(j).Child("secretRef", "name"), e.SecretRef.Name)...)
				}
			}
		}
	}
	containers(p.Child("initContainers"), spec.InitContainers)
	containers(p.Child("containers"), spec.Containers)
	return errs
}

// volumeSecretRefs checks the Secrets a volume reads: Secret volumes, projections, and the
// credentials of the volume plugins that take a Secret reference.
func volumeSecretRefs(p *field.Path, v *corev1.VolumeSource) field.ErrorList {
	var errs field.ErrorList
	ref := func(path *field.Path, r *corev1.LocalObjectReference) {
		if r != nil {
			errs = append(errs, GeneratedSecretRef(path, r.Name)...)
		}
	}
	switch {
	case v.Secret != nil:
		errs = append(errs, GeneratedSecretRef(p.Child("secret", "secretName"), v.Secret.SecretName)...)
	case v.Projected != nil:
		for i, s := range v.Projected.Sources {
			if s.Secret != nil {
				errs = append(errs, GeneratedSecretRef(p.Child("projected", "sources").Index(i).Child("secret", "name"), s.Secret.Name)...)
			}
		}
	case v.CSI != nil:
		ref(p.Child("csi", "nodePublishSecretRef", "name"), v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		errs = append(errs, GeneratedSecretRef(p.Child("azureFile", "secretName"), v.AzureFile.SecretName)...)
	case v.CephFS != nil:
		ref(p.Child("cephfs", "secretRef", "name"), v.CephFS.SecretRef)
	case v.RBD != nil:
		ref(p.Child("rbd", "secretRef", "name"), v.RBD.SecretRef)
	case v.FlexVolume != nil:
		ref(p.Child("flexVolume", "secretRef", "name"), v.FlexVolume.SecretRef)
	case v.ISCSI != nil:
		ref(p.Child("iscsi", "secretRef", "name"), v.ISCSI.SecretRef)
	case v.ScaleIO != nil:
		ref(p.Child("scaleIO", "secretRef", "name"), v.ScaleIO.SecretRef)
	case v.StorageOS != nil:
		ref(p.Child("storageos", "secretRef", "name"), v.StorageOS.SecretRef)
	case v.Cinder != nil:
		ref(p.Child("cinder", "secretRef", "name"), v.Cinder.SecretRef)
	}
	return errs
}

// GeneratedSecretRef refuses a Secret name of the form troupe gives a job's generated SSH keys.
func GeneratedSecretRef(p *field.Path, name string) field.ErrorList {
	job, ok := strings.CutSuffix(name, GeneratedSecretSuffix)
	if !ok || job == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"Secret %q has the name troupe gives job %s's generated SSH keys (<job>%s), which only that job's pods may read: name a Secret whose name does not end in %s",
		name, job, GeneratedSecretSuffix, GeneratedSecretSuffix))}
}

// GeneratedAccountRef refuses a ServiceAccount name of the form troupe gives a job's KubeExec
// launcher account.
func GeneratedAccountRef(p *field.Path, name string) field.ErrorList {
	job, ok := strings.CutSuffix(name, GeneratedAccountSuffix)
	if !ok || job == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"ServiceAccount %q has the name troupe gives job %s's launcher (<job>%s), which may exec into that job's workers: name a ServiceAccount whose name does not end in %s",
		name, job, GeneratedAccountSuffix, GeneratedAccountSuffix))}
}
