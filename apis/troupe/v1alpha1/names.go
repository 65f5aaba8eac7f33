package v1alpha1

// The names of a job's children, derived from the job's name, and the limits they must fit.
// The adapters name the children with these functions and the webhook bounds the job's name
// with them; the CRDs' CEL rules on each kind's root type carry the same numbers as literals
// (markers cannot compute), and names_test.go fails when the two disagree.

const (
	// MaxChildNameLength bounds a child named like a DNS label: the headless Service, a batch
	// Job (its pods carry the label job-name=<name>), a pod host name.
	MaxChildNameLength = 63
	// statefulSetRevisionHash is what a StatefulSet appends to its name in its pods' label
	// controller-revision-hash: '-' and a 10-character hash.
	statefulSetRevisionHash = 11
	// MaxStatefulSetNameLength bounds a StatefulSet's name so that the pods' label
	// controller-revision-hash=<name>-<hash> fits a label value. The pods' host names
	// <name>-<ordinal> then fit a DNS label too: an ordinal has at most 10 digits.
	MaxStatefulSetNameLength = MaxChildNameLength - statefulSetRevisionHash

	// chainerWorkerSetInfix joins a ChainerJob's name and a worker set's in its StatefulSet's.
	chainerWorkerSetInfix = "-workerset-"
	// ChainerWorkerSetNameBudget is how many characters a ChainerJob's name and one of its
	// worker sets' names may have together.
	ChainerWorkerSetNameBudget = MaxStatefulSetNameLength - len(chainerWorkerSetInfix)

	// MPIWorkerSetName is the name of the one worker set of an MPIJob or HorovodJob (label
	// troupe.dev/worker-set).
	MPIWorkerSetName = "worker"
)

// DerivedName is a child whose name is the job's name and a fixed suffix.
// +kubebuilder:object:generate=false
type DerivedName struct {
	// What is the child, for messages, e.g. "master Job".
	What string
	// Suffix follows the job's name, e.g. "-master".
	Suffix string
	// Max is the longest name the child may have.
	Max int
}

// For is the child's name for a job of that name.
func (d DerivedName) For(job string) string { return job + d.Suffix }

// MaxJobName is the longest job name whose child's name fits.
func (d DerivedName) MaxJobName() int { return d.Max - len(d.Suffix) }

var (
	// ChainerMasterJob is a ChainerJob's master, a batch Job.
	ChainerMasterJob = DerivedName{What: "master Job", Suffix: "-master", Max: MaxChildNameLength}
	// MPILauncherJob is an MPIJob's or HorovodJob's launcher, a batch Job.
	MPILauncherJob = DerivedName{What: "launcher Job", Suffix: "-launcher", Max: MaxChildNameLength}
	// MPIWorkerStatefulSet is an MPIJob's or HorovodJob's worker StatefulSet.
	MPIWorkerStatefulSet = DerivedName{What: "StatefulSet", Suffix: "-" + MPIWorkerSetName, Max: MaxStatefulSetNameLength}
)

// ChainerWorkerSetStatefulSetName is the StatefulSet of a ChainerJob's worker set.
func ChainerWorkerSetStatefulSetName(job, set string) string {
	return job + chainerWorkerSetInfix + set
}

// DerivedNames are the children of a ChainerJob named from its name alone.
func (*ChainerJob) DerivedNames() []DerivedName { return []DerivedName{ChainerMasterJob} }

// MPIProgramDerivedNames are the children of an MPIJob or HorovodJob named from its name alone.
var MPIProgramDerivedNames = []DerivedName{MPILauncherJob, MPIWorkerStatefulSet}

// DerivedNames are the children of an MPIJob named from its name alone.
func (*MPIJob) DerivedNames() []DerivedName { return MPIProgramDerivedNames }

// DerivedNames are the children of a HorovodJob named from its name alone.
func (*HorovodJob) DerivedNames() []DerivedName { return MPIProgramDerivedNames }

// BindingName is the derived name that bounds the job's name the most: the one whose MaxJobName
// is smallest. ok is false when there is none.
func BindingName(derived []DerivedName) (binding DerivedName, ok bool) {
	for i, d := range derived {
		if i == 0 || d.MaxJobName() < binding.MaxJobName() {
			binding = d
		}
	}
	return binding, len(derived) > 0
}
