package webhooks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
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

const (
	// generatedSecretSuffix ends the name of every job's SSH Secret (mpi.SSHSecretName).
	generatedSecretSuffix = "-ssh"
	// generatedAccountSuffix ends the name of every job's KubeExec ServiceAccount
	// (mpi.ExecAccountName).
	generatedAccountSuffix = "-exec"
)

// validateCredentialRefs refuses every reference of the job's spec to a name troupe gives a
// job's generated credentials: in each pod template (ServiceAccount, Secret volumes and
// projections, environment, image pull Secrets, of init and main containers alike), in
// ssh.secretName and in the repositories' gitSecretName.
func validateCredentialRefs(spec *field.Path, codes []troupev1.AppCode, l *troupev1.MPILaunch, templates []podTemplateAt) field.ErrorList {
	var errs field.ErrorList
	for _, t := range templates {
		errs = append(errs, templateCredentialRefs(t.path.Child("spec"), &t.tmpl.Spec)...)
	}
	if l != nil && l.SSH != nil {
		errs = append(errs, secretRef(spec.Child("ssh", "secretName"), l.SSH.SecretName)...)
	}
	for i := range codes {
		errs = append(errs, secretRef(spec.Child("appCodesToSync").Index(i).Child("gitSecretName"), codes[i].GitSecretName)...)
	}
	return errs
}

// templateCredentialRefs checks every Secret and ServiceAccount a pod spec names.
func templateCredentialRefs(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, accountRef(p.Child("serviceAccountName"), spec.ServiceAccountName)...)
	errs = append(errs, accountRef(p.Child("serviceAccount"), spec.DeprecatedServiceAccount)...)
	for i, s := range spec.ImagePullSecrets {
		errs = append(errs, secretRef(p.Child("imagePullSecrets").Index(i).Child("name"), s.Name)...)
	}
	for i := range spec.Volumes {
		errs = append(errs, volumeSecretRefs(p.Child("volumes").Index(i), &spec.Volumes[i].VolumeSource)...)
	}
	containers := func(list *field.Path, cs []corev1.Container) {
		for i := range cs {
			cp := list.Index(i)
			for j, e := range cs[i].Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					errs = append(errs, secretRef(cp.Child("env").Index(j).Child("valueFrom", "secretKeyRef", "name"), e.ValueFrom.SecretKeyRef.Name)...)
				}
			}
			for j, e := range cs[i].EnvFrom {
				if e.SecretRef != nil {
					errs = append(errs, secretRef(cp.Child("envFrom").Index(j).Child("secretRef", "name"), e.SecretRef.Name)...)
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
			errs = append(errs, secretRef(path, r.Name)...)
		}
	}
	switch {
	case v.Secret != nil:
		errs = append(errs, secretRef(p.Child("secret", "secretName"), v.Secret.SecretName)...)
	case v.Projected != nil:
		for i, s := range v.Projected.Sources {
			if s.Secret != nil {
				errs = append(errs, secretRef(p.Child("projected", "sources").Index(i).Child("secret", "name"), s.Secret.Name)...)
			}
		}
	case v.CSI != nil:
		ref(p.Child("csi", "nodePublishSecretRef", "name"), v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		errs = append(errs, secretRef(p.Child("azureFile", "secretName"), v.AzureFile.SecretName)...)
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
	}
	return errs
}

func secretRef(p *field.Path, name string) field.ErrorList {
	job, ok := strings.CutSuffix(name, generatedSecretSuffix)
	if !ok || job == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"Secret %q has the name troupe gives job %s's generated SSH keys (<job>%s), which only that job's pods may read: name a Secret whose name does not end in %s",
		name, job, generatedSecretSuffix, generatedSecretSuffix))}
}

func accountRef(p *field.Path, name string) field.ErrorList {
	job, ok := strings.CutSuffix(name, generatedAccountSuffix)
	if !ok || job == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"ServiceAccount %q has the name troupe gives job %s's launcher (<job>%s), which may exec into that job's workers: name a ServiceAccount whose name does not end in %s",
		name, job, generatedAccountSuffix, generatedAccountSuffix))}
}
