package webhooks

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// The rules of kube-openmpi's features every kind shares: code from git (appCodesToSync), a
// user's SSH Secret (ssh.secretName) and when the clean-pod policy applies (cleanPodPolicyOn).
// The CRD holds the same rules as CEL where CEL can say them; these also run in unit tests and
// fuzzing, and check what CEL cannot (mount paths against the pod templates).

var (
	cleanPodPolicyOns = []troupev1.CleanPodPolicyOn{troupev1.CleanPodPolicyOnFinished, troupev1.CleanPodPolicyOnSucceeded}
	// gitURL is a repository URL go-git clones from; gitSCP is git's user@host:path form.
	gitURL    = regexp.MustCompile(`^(https?|ssh|git)://[^ ]+$`)
	gitSCP    = regexp.MustCompile(`^[^@/: ]+@[^/: ]+:[^ ]+$`)
	gitBranch = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/+@=-]*$`)
	// maxAppCodeName keeps the volume code-<name> and the container git-<name> DNS labels.
	maxAppCodeName = 50
	maxAppCodes    = 8
)

// validateUserInputs checks appCodesToSync against the job's pod templates (their containers
// mount every repository) and ssh.secretName against the job's transport (defTransport when
// the spec names none).
func validateUserInputs(spec *field.Path, codes []troupev1.AppCode, l *troupev1.MPILaunch, defTransport troupev1.MPITransport,
	templates []podTemplateAt) field.ErrorList {
	errs := validateAppCodes(spec.Child("appCodesToSync"), codes, templates)
	errs = append(errs, validateCredentialRefs(spec, codes, l, templates)...)
	if l == nil || l.SSH == nil || l.SSH.SecretName == "" {
		return errs
	}
	p := spec.Child("ssh", "secretName")
	for _, msg := range validation.IsDNS1123Subdomain(l.SSH.SecretName) {
		errs = append(errs, field.Invalid(p, l.SSH.SecretName, msg))
	}
	transport := l.Transport
	if transport == "" {
		transport = defTransport
	}
	if transport != troupev1.MPITransportSSH {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("the %s transport uses no SSH keys; set transport %s or remove ssh.secretName",
			transport, troupev1.MPITransportSSH)))
	}
	return errs
}

func validateAppCodes(p *field.Path, codes []troupev1.AppCode, templates []podTemplateAt) field.ErrorList {
	var errs field.ErrorList
	if len(codes) > maxAppCodes {
		errs = append(errs, field.TooMany(p, len(codes), maxAppCodes))
	}
	errs = append(errs, troupev1.AppCodeURLErrors(p, codes)...)
	names, mounts := sets.New[string](), sets.New[string]()
	for i := range codes {
		c, cp := &codes[i], p.Index(i)
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
		}
		if len(c.Name) > maxAppCodeName {
			errs = append(errs, field.TooLong(cp.Child("name"), c.Name, maxAppCodeName))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		switch {
		case !gitURL.MatchString(c.GitRepo) && !gitSCP.MatchString(c.GitRepo):
			errs = append(errs, field.Invalid(cp.Child("gitRepo"), troupev1.RedactGitURL(c.GitRepo),
				"must be an https://, http://, ssh:// or git:// URL, or user@host:path (file:// has nothing to read in a pod)"))
		case c.GitSecretName != "" && !strings.HasPrefix(c.GitRepo, "ssh://") && strings.Contains(c.GitRepo, "://"):
			errs = append(errs, field.Invalid(cp.Child("gitSecretName"), c.GitSecretName,
				"holds an SSH key, which only an ssh:// or user@host:path repository uses"))
		}
		if c.GitSecretName != "" {
			for _, msg := range validation.IsDNS1123Subdomain(c.GitSecretName) {
				errs = append(errs, field.Invalid(cp.Child("gitSecretName"), c.GitSecretName, msg))
			}
		}
		if b := c.GitBranch; b != "" && (!gitBranch.MatchString(b) || strings.Contains(b, "..") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock")) {
			errs = append(errs, field.Invalid(cp.Child("gitBranch"), b, "must be a git branch name (letters, digits and ._/+@=-)"))
		}
		errs = append(errs, validateCodeMount(cp, c, templates)...)
		if mounts.Has(path.Clean(c.MountPath)) {
			errs = append(errs, field.Duplicate(cp.Child("mountPath"), c.MountPath))
		}
		mounts.Insert(path.Clean(c.MountPath))
	}
	return errs
}

// gitHostKeyWarnings tell, at create, that a repository read over SSH has its server's host key
// checked only when its Secret holds known_hosts: the webhook does not read Secrets (one may
// be created after the job), and kube-openmpi's documented Secret holds the key "ssh" alone.
func gitHostKeyWarnings(p *field.Path, codes []troupev1.AppCode) []string {
	var out []string
	for i, c := range codes {
		if c.GitSecretName != "" {
			out = append(out, fmt.Sprintf("%s: the git server's host key is checked only when Secret %q holds the key %q "+
				"(ssh-keyscan HOST); without it any host key is accepted", p.Index(i).Child("gitSecretName"), c.GitSecretName, troupev1.GitSecretKnownHosts))
		}
	}
	return out
}

// validateCodeMount checks where a repository is mounted: an absolute path outside troupe's
// own directories that no container of the job mounts anything at already (the API server
// would refuse the StatefulSet or Job with two mounts at one path).
func validateCodeMount(p *field.Path, c *troupev1.AppCode, templates []podTemplateAt) field.ErrorList {
	var errs field.ErrorList
	mp := p.Child("mountPath")
	clean := path.Clean(c.MountPath)
	switch {
	case !path.IsAbs(c.MountPath):
		errs = append(errs, field.Invalid(mp, c.MountPath, "must be an absolute path"))
	case clean == "/etc/troupe" || strings.HasPrefix(clean, "/etc/troupe/") || clean == "/opt/troupe" || strings.HasPrefix(clean, "/opt/troupe/"):
		errs = append(errs, field.Invalid(mp, c.MountPath, "must not be under /etc/troupe or /opt/troupe, where troupe mounts its own files"))
	default:
		for _, t := range templates {
			tp, tmpl := t.path, t.tmpl
			for _, ctr := range slices.Concat(tmpl.Spec.InitContainers, tmpl.Spec.Containers) {
				for _, m := range ctr.VolumeMounts {
					if path.Clean(m.MountPath) == clean {
						errs = append(errs, field.Invalid(mp, c.MountPath, fmt.Sprintf(
							"container %q of %s mounts %s there already", ctr.Name, tp, m.Name)))
					}
				}
			}
			// The names troupe gives the repository's volumes and init container.
			for _, v := range tmpl.Spec.Volumes {
				if v.Name == engine.CodeVolumeName(c.Name) || v.Name == engine.GitSSHVolumeName(c.Name) {
					errs = append(errs, field.Invalid(p.Child("name"), c.Name, fmt.Sprintf(
						"%s has a volume %q, the name troupe gives this repository's volume: rename one", tp, v.Name)))
				}
			}
			for _, ctr := range tmpl.Spec.InitContainers {
				if ctr.Name == engine.GitContainerName(c.Name) {
					errs = append(errs, field.Invalid(p.Child("name"), c.Name, fmt.Sprintf(
						"%s has an init container %q, the name of this repository's clone: rename one", tp, ctr.Name)))
				}
			}
		}
	}
	if s := c.SubPath; s != "" && (path.IsAbs(s) || s == ".." || strings.HasPrefix(s, "../") || strings.Contains(s, "/../") || strings.HasSuffix(s, "/..")) {
		errs = append(errs, field.Invalid(p.Child("subPath"), s, "must be a relative path inside the repository"))
	}
	return errs
}

// validateCleanPodPolicyOn checks when the clean-pod policy applies; with policy None
// (cleanPodPolicy, or cleanUpWorkers false) Succeeded would have nothing to clean.
func validateCleanPodPolicyOn(p *field.Path, rp *troupev1.RunPolicy) field.ErrorList {
	on := rp.CleanPodPolicyOn
	if on == nil {
		return nil
	}
	if !oneOf(cleanPodPolicyOns, *on) {
		return field.ErrorList{field.NotSupported(p.Child("cleanPodPolicyOn"), *on, cleanPodPolicyOns)}
	}
	none := (rp.CleanPodPolicy != nil && *rp.CleanPodPolicy == troupev1.CleanPodPolicyNone) || (rp.CleanUpWorkers != nil && !*rp.CleanUpWorkers)
	if *on == troupev1.CleanPodPolicyOnSucceeded && none {
		return field.ErrorList{field.Invalid(p.Child("cleanPodPolicyOn"), *on,
			"applies the clean-pod policy after success only, and the policy is None: there is nothing to clean")}
	}
	return nil
}

// podTemplateAt is one pod template of a job and its field path.
type podTemplateAt struct {
	path *field.Path
	tmpl *corev1.PodTemplateSpec
}

// mpiTemplates are the pod templates of an MPIJob or HorovodJob.
func mpiTemplates(p *troupev1.MPIProgramSpec, at programPaths) []podTemplateAt {
	var out []podTemplateAt
	if !at.launcherAlone || len(p.Worker.Template.Spec.Containers) > 0 {
		out = append(out, podTemplateAt{at.workerTemplate, &p.Worker.Template})
	}
	if p.Launcher != nil && p.Launcher.Template != nil {
		out = append(out, podTemplateAt{at.launcherTemplate, p.Launcher.Template})
	}
	return out
}

// chainerTemplates are the pod templates of a ChainerJob: the master's, then the worker sets'
// in the order of their paths.
func chainerTemplates(s *troupev1.ChainerJobSpec) []podTemplateAt {
	spec := field.NewPath("spec")
	out := []podTemplateAt{{spec.Child("master", "template"), &s.Master.Template}}
	for k, ws := range s.WorkerSets {
		out = append(out, podTemplateAt{elementPath(spec.Child("workerSets"), k).Child("template"), &ws.Template})
	}
	slices.SortFunc(out[1:], func(a, b podTemplateAt) int { return strings.Compare(a.path.String(), b.path.String()) })
	return out
}

// elementPath is the path of a list's element by index, or of a map's by key.
func elementPath[K int | string](p *field.Path, k K) *field.Path {
	switch v := any(k).(type) {
	case int:
		return p.Index(v)
	default:
		return p.Key(fmt.Sprint(v))
	}
}
