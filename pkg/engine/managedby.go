package engine

import (
	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// managedElsewhere reports whether the job's runPolicy.managedBy gives it to another controller
// (a MultiKueue dispatcher, say): the engine then neither creates its children nor writes its
// status, as the Job controller does for a batch Job with spec.managedBy.
func managedElsewhere(job Object) bool {
	q, ok := job.(troupev1.QueuedJob)
	return ok && q.JobRunPolicy().ManagedElsewhere()
}
