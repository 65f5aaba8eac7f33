package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restoreSchedulingDirectives carries the master template's scheduling fields (nodeSelector,
// tolerations, affinity, scheduling gates) into a master Job that is suspended and has never
// started, the one state in which the API server lets them change (as Kueue relies on). A
// job's templates may change only while it is suspended (webhooks/update.go), so this is how
// the placement a user or a queueing system chose reaches the launcher when the job resumes;
// the same update may unsuspend the Job. It reports whether it changed anything.
func restoreSchedulingDirectives(cur, want *batchv1.Job) bool {
	if cur.Spec.Suspend == nil || !*cur.Spec.Suspend || cur.Status.StartTime != nil {
		return false
	}
	c, w := &cur.Spec.Template.Spec, &want.Spec.Template.Spec
	if equality.Semantic.DeepEqual(c.NodeSelector, w.NodeSelector) &&
		equality.Semantic.DeepEqual(c.Tolerations, w.Tolerations) &&
		equality.Semantic.DeepEqual(c.Affinity, w.Affinity) &&
		equality.Semantic.DeepEqual(c.SchedulingGates, w.SchedulingGates) {
		return false
	}
	c.NodeSelector, c.Tolerations, c.Affinity, c.SchedulingGates = w.NodeSelector, w.Tolerations, w.Affinity, w.SchedulingGates
	return true
}

// masterCreationAllowed re-reads the job from the API server before the master Job is created,
// and allows it only when the cache's copy is the latest. The master Job runs the training: a
// cache that lags behind (a job whose status already says it finished, whose master Job was
// then deleted) must never start it again. When the copies differ, the watch event of the
// newer version is on its way and reconciles again.
func (r *Reconciler) masterCreationAllowed(ctx context.Context, job Object) (bool, error) {
	fresh := r.adapter.NewObject()
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, nil
		}
		return false, fmt.Errorf("re-read the job before creating its master: %w", err)
	}
	if fresh.GetUID() != job.GetUID() || fresh.GetResourceVersion() != job.GetResourceVersion() {
		return false, nil
	}
	return !Finished(fresh.JobStatus(), nil), nil
}
