package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Storage is runPolicy.storage: volume claims troupe makes for the job's pods, for checkpoints
// that outlive a pod and a whole-job restart (docs/storage.md). Each claim is mounted as the
// volume of its name: a container mounts it with a volumeMount of that name.
// +kubebuilder:validation:XValidation:rule="(has(self.claimTemplates) ? self.claimTemplates.map(c, c.name) : []).all(n, !(has(self.sharedClaims) ? self.sharedClaims.map(c, c.name) : []).exists(m, m == n))",message="a claim template and a shared claim must not have one name: each is a volume of the pods"
type Storage struct {
	// claimTemplates make one claim per worker pod of the sets they name, as a StatefulSet's
	// volumeClaimTemplates do: <name>-<pod hostname> (for example checkpoints-train-worker-0).
	// The pod of one hostname gets its claim back whenever it is made again: after its
	// replacement, a whole-job restart, a suspension.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	ClaimTemplates []WorkerClaimTemplate `json:"claimTemplates,omitempty"`

	// sharedClaims make one claim per job, <job>-<name>, mounted in every pod of the job (the
	// launcher or master and every worker): its access modes must let them share it
	// (ReadWriteMany, or ReadWriteOnce with every pod on one node).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	SharedClaims []SharedClaim `json:"sharedClaims,omitempty"`

	// retention says what becomes of the claims when the job is deleted: Delete (the default)
	// deletes them with it; Retain keeps them, and a job created again with the same name and
	// claims takes them back.
	// +kubebuilder:validation:Enum=Delete;Retain
	// +optional
	Retention *ClaimRetention `json:"retention,omitempty"`
}

// WorkerClaimTemplate is a claim of every worker pod of some worker sets.
type WorkerClaimTemplate struct {
	// name is the pods' volume name and the start of each claim's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// workerSets are the worker sets whose pods get a claim (worker; a ChainerJob's
	// workerSets[].name). Default: every set.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	WorkerSets []string `json:"workerSets,omitempty"`

	// spec is each claim's spec.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SharedClaim is one claim of the whole job.
type SharedClaim struct {
	// name is the pods' volume name; the claim is <job>-<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// spec is the claim's spec.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// ClaimRetention is what becomes of a job's claims when the job is deleted.
type ClaimRetention string

const (
	// ClaimRetentionDelete deletes the claims with the job (they are its children).
	ClaimRetentionDelete ClaimRetention = "Delete"
	// ClaimRetentionRetain keeps the claims after the job is deleted.
	ClaimRetentionRetain ClaimRetention = "Retain"
)

// Retained says the claims outlive the job.
func (s *Storage) Retained() bool {
	return s != nil && s.Retention != nil && *s.Retention == ClaimRetentionRetain
}
