package v1alpha1

// AppCode is one git repository cloned into every pod of a job before its containers start
// (kube-openmpi's appCodesToSync entry, with its field names). The clone is made once per pod,
// by an init container running troupe-agent git-sync, into an emptyDir that every container of
// the pod mounts at mountPath; all pods of a job see the commit the branch pointed at when they
// started.
// +kubebuilder:validation:XValidation:rule="!has(self.gitSecretName) || self.gitRepo.startsWith('ssh://') || !self.gitRepo.contains('://')",message="holds an SSH key, which only an ssh:// or user@host:path repository uses",fieldPath=".gitSecretName"
// +kubebuilder:validation:XValidation:rule="!(self.gitRepo.startsWith('http://') || self.gitRepo.startsWith('git://')) || (has(self.allowInsecureTransport) && self.allowInsecureTransport)",message="http:// and git:// neither encrypt the code nor authenticate the server, so anyone between the pods and the server can change what the job runs: use https:// or ssh://, or set allowInsecureTransport: true",fieldPath=".gitRepo"
type AppCode struct {
	// name identifies the repository within the job. It names the init container
	// (git-<name>) and the volume (code-<name>), so it must be a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// gitRepo is the repository's URL: https://, ssh://, or the scp form user@host:path
	// (http:// and git:// with allowInsecureTransport). A private repository is reached over SSH
	// with gitSecretName; an http(s) URL carries no user or token. (file:// is not accepted: the
	// init container sees only its own volumes.)
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh|git)://[^ ]+$') || self.matches('^[^@/: ]+@[^/: ]+:[^ ]+$')",message="must be an https://, http://, ssh:// or git:// URL, or user@host:path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://[^/@]*:[^/@]*@') && !self.matches('^https?://[^/@]*@')",message="must not carry a user, token or password: the URL is visible in the pod's spec and logs; use an ssh:// URL with gitSecretName"
	GitRepo string `json:"gitRepo"`

	// allowInsecureTransport lets gitRepo be an http:// or git:// URL, which neither encrypt
	// the code nor authenticate the server: anyone between the pods and the server can change
	// what the job runs. Default false: such URLs are refused.
	// +optional
	AllowInsecureTransport bool `json:"allowInsecureTransport,omitempty"`

	// gitBranch is the branch to check out. Default: the repository's default branch (HEAD).
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_][A-Za-z0-9._/+@=-]*$') && !self.contains('..') && !self.endsWith('/') && !self.endsWith('.lock')",message="must be a git branch name (letters, digits and ._/+@=-)"
	// +optional
	GitBranch string `json:"gitBranch,omitempty"`

	// mountPath is where the repository (or its subPath) appears in every container of the
	// job's pods.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^/etc/troupe(/|$)') && !self.matches('^/opt/troupe(/|$)')",message="must not be under /etc/troupe or /opt/troupe, where troupe mounts its own files"
	MountPath string `json:"mountPath"`

	// subPath is a directory of the repository to mount at mountPath instead of the whole
	// repository, for example chainermn/examples.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="must be a relative path inside the repository"
	// +optional
	SubPath string `json:"subPath,omitempty"`

	// gitSecretName names a Secret of the job's namespace whose key "ssh" is the private key
	// (a deploy key) that reads the repository over SSH, as kube-openmpi's. Its key
	// "known_hosts" pins the git server's host key (ssh-keyscan HOST); without it any host key
	// is accepted, with a warning, unless the operator runs with --git-require-known-hosts,
	// which then requires the key.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	GitSecretName string `json:"gitSecretName,omitempty"`
}

// Keys of an AppCode's gitSecretName Secret.
const (
	// GitSecretSSHKey is the key of the private key, as in kube-openmpi.
	GitSecretSSHKey = "ssh"
	// GitSecretKnownHosts is the optional key of the git server's known_hosts lines.
	GitSecretKnownHosts = "known_hosts"
)
