package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

const (
	// GitSyncDest is where a git init container clones into: the root of the repository's
	// emptyDir.
	GitSyncDest = "/troupe/code"
	// GitSSHDir is where a git init container finds the repository's Secret (key "ssh", and
	// "known_hosts" when given).
	GitSSHDir = "/etc/troupe/git-ssh"

	gitContainerPrefix = "git-"
	codeVolumePrefix   = "code-"
	gitSSHVolumePrefix = "git-ssh-"
)

// CodeSync clones git repositories (appCodesToSync) into every pod of a job, one init
// container running `troupe-agent git-sync` per repository, before any other container starts.
type CodeSync struct {
	// Image is the troupe-agent image.
	Image string
	Repos []troupev1.AppCode
}

// CodeVolumeName is the emptyDir a repository is cloned into.
func CodeVolumeName(name string) string { return codeVolumePrefix + name }

// GitSSHVolumeName is the volume of a repository's deploy key.
func GitSSHVolumeName(name string) string { return gitSSHVolumePrefix + name }

// GitContainerName is the init container that clones repository name.
func GitContainerName(name string) string { return gitContainerPrefix + name }

// decoratePod adds, per repository, an emptyDir, the init container that clones into it, and
// its mount at mountPath (or the repository's subPath there) in every container, init
// containers included. The git init containers run first: a clone that fails stops the pod
// before it waits for anything, and the user's own init containers may use the code.
func (cs CodeSync) decoratePod(s *Spec, tmpl *corev1.PodTemplateSpec) {
	if len(cs.Repos) == 0 {
		return
	}
	sec := cloneSecurity(s, &tmpl.Spec)
	var inits []corev1.Container
	for _, r := range cs.Repos {
		volume := CodeVolumeName(r.Name)
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
			Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		})
		args := []string{"git-sync", "--repo=" + r.GitRepo, "--dest=" + GitSyncDest}
		if r.GitBranch != "" {
			args = append(args, "--branch="+r.GitBranch)
		}
		mounts := []corev1.VolumeMount{{Name: volume, MountPath: GitSyncDest}}
		if r.GitSecretName != "" {
			secretVolume := GitSSHVolumeName(r.Name)
			// The Secret is mounted in this init container only; it may run as any user, so
			// its files are readable by all of the container's users.
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
				Name: secretVolume,
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: r.GitSecretName, DefaultMode: ptr.To[int32](0o444),
				}},
			})
			mounts = append(mounts, corev1.VolumeMount{Name: secretVolume, MountPath: GitSSHDir, ReadOnly: true})
			args = append(args, "--ssh-dir="+GitSSHDir)
		}
		inits = append(inits, corev1.Container{
			Name:                     GitContainerName(r.Name),
			Image:                    cs.Image,
			Command:                  []string{"/troupe-agent"},
			Args:                     args,
			VolumeMounts:             mounts,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			// A clone of a large repository holds pack data in memory: room for it, bounded.
			Resources:       InjectedResources("50m", "64Mi", "1", "1Gi"),
			SecurityContext: RestrictedSecurityContext(&sec),
		})
		code := corev1.VolumeMount{Name: volume, MountPath: r.MountPath, SubPath: r.SubPath}
		for i := range tmpl.Spec.Containers {
			tmpl.Spec.Containers[i].VolumeMounts = append(tmpl.Spec.Containers[i].VolumeMounts, code)
		}
		// The init containers already there (the user's, the launcher's wait); not the clones.
		for i := range tmpl.Spec.InitContainers {
			tmpl.Spec.InitContainers[i].VolumeMounts = append(tmpl.Spec.InitContainers[i].VolumeMounts, code)
		}
	}
	tmpl.Spec.InitContainers = append(inits, tmpl.Spec.InitContainers...)
}

// cloneSecurity is the security context of the git init containers. They run as the user and
// group of the pod's main container (else its first container), so the clone belongs to the
// user who runs the code and can write into it; when neither that container nor the pod names
// a user, as the agent image's non-root user 65532. They run as non-root unless that user is
// root, with no privileges and a read-only root file system (they write only to the emptyDir).
func cloneSecurity(s *Spec, pod *corev1.PodSpec) corev1.SecurityContext {
	sec := corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if len(pod.Containers) > 0 {
		c := &pod.Containers[0]
		for i := range pod.Containers {
			if pod.Containers[i].Name == s.MainContainer {
				c = &pod.Containers[i]
			}
		}
		if cs := c.SecurityContext; cs != nil {
			sec.RunAsUser, sec.RunAsGroup = copyOf(cs.RunAsUser), copyOf(cs.RunAsGroup)
		}
	}
	user := sec.RunAsUser
	if user == nil && pod.SecurityContext != nil {
		user = pod.SecurityContext.RunAsUser // inherited from the pod
	}
	if user == nil {
		user = ptr.To(agentUser)
		sec.RunAsUser = user
	}
	sec.RunAsNonRoot = ptr.To(*user != 0)
	return sec
}

// agentUser is the non-root user of the troupe-agent image.
const agentUser int64 = 65532

func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

// isCloner reports whether name is the init container that clones one of the repositories.
func (cs CodeSync) isCloner(name string) bool {
	return slices.ContainsFunc(cs.Repos, func(r troupev1.AppCode) bool { return GitContainerName(r.Name) == name })
}
