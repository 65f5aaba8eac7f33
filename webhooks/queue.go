package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// maxQueuedPodSets is how many pod sets (master and worker sets) a Kueue Workload holds.
const maxQueuedPodSets = 8

// queuedJob is a job of any kind as Kueue sees it.
type queuedJob interface {
	metav1.Object
	troupev1.QueuedJob
}

// suspendIfQueued creates a job that names a Kueue LocalQueue (label kueue.x-k8s.io/queue-name)
// suspended, so that none of its pods starts before Kueue admits it, as Kueue's own webhooks do
// for its job kinds; without Kueue in the cluster the job is held so (docs/kueue.md). Kueue's
// admission later resumes the job by writing suspend: false, which this must not undo; but an
// update that drops the field (a server-side apply of the manifest, whose applier owns what
// this wrote at creation) keeps the stored job suspended, or re-applying a queued job's
// manifest would start it outside its quota.
//
// A job MultiKueue dispatches (spec.managedBy kueue.x-k8s.io/multikueue) runs no pod in this
// cluster: its suspend is the user's own, which the operator gives its Workload as spec.active
// (docs/kueue.md).
func suspendIfQueued(ctx context.Context, job queuedJob) {
	if _, ok := troupev1.Queued(job.GetLabels()); !ok || troupev1.DispatchedByMultiKueue(job) {
		return
	}
	req, err := admission.RequestFromContext(ctx)
	switch {
	case err != nil || req.Operation == admissionv1.Create:
		job.JobRunPolicy().Suspend = ptr.To(true)
	case req.Operation == admissionv1.Update && job.JobRunPolicy().Suspend == nil && storedSuspended(req.OldObject.Raw):
		job.JobRunPolicy().Suspend = ptr.To(true)
	}
}

// storedSuspended reads runPolicy.suspend from a stored job of any kind.
func storedSuspended(raw []byte) bool {
	var stored struct {
		Spec struct {
			RunPolicy struct {
				Suspend *bool `json:"suspend"`
			} `json:"runPolicy"`
		} `json:"spec"`
	}
	return json.Unmarshal(raw, &stored) == nil && ptr.Deref(stored.Spec.RunPolicy.Suspend, false)
}

// multiKueueToSpec stores runPolicy.managedBy kueue.x-k8s.io/multikueue (kubeflow's place for
// it) as spec.managedBy, the field Kueue's MultiKueue reads on a kind it does not know and
// clears on the copy it makes in a worker cluster: written in runPolicy, the copy would say it
// is MultiKueue's too, and no cluster would run it. On an update it is moved only where the
// stored job has it there, so that a job stored as written (the webhook down) keeps its shape.
func multiKueueToSpec(ctx context.Context, job queuedJob) {
	rp := job.JobRunPolicy()
	if ptr.Deref(rp.ManagedBy, "") != troupev1.ManagedByMultiKueue || ptr.Deref(job.JobManagedBy(), troupev1.ManagedByMultiKueue) != troupev1.ManagedByMultiKueue {
		return
	}
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Update &&
		storedSpecManagedBy(req.OldObject.Raw) != troupev1.ManagedByMultiKueue {
		return
	}
	job.SetJobManagedBy(rp.ManagedBy)
	rp.ManagedBy = nil
}

// storedSpecManagedBy reads spec.managedBy from a stored job of any kind.
func storedSpecManagedBy(raw []byte) string {
	var stored struct {
		Spec struct {
			ManagedBy string `json:"managedBy"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(raw, &stored)
	return stored.Spec.ManagedBy
}

// validateManagedBy refuses a job whose spec.managedBy and runPolicy.managedBy name two
// controllers.
func validateManagedBy(job queuedJob) field.ErrorList {
	spec, rp := job.JobManagedBy(), job.JobRunPolicy().ManagedBy
	if spec == nil || rp == nil || *spec == *rp {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "managedBy"), *spec,
		fmt.Sprintf("names another controller than spec.runPolicy.managedBy (%q): give one of them", *rp))}
}

// validateQueued refuses a queued job whose pod sets a Kueue Workload cannot hold: more than
// eight, or a worker set named like the master's pod set.
func validateQueued(job queuedJob) field.ErrorList {
	if _, ok := troupev1.Queued(job.GetLabels()); !ok {
		return nil
	}
	sets := job.PodSets()
	labels := field.NewPath("metadata", "labels").Key(troupev1.LabelQueueName)
	var errs field.ErrorList
	if len(sets) > maxQueuedPodSets {
		errs = append(errs, field.Invalid(labels, job.GetLabels()[troupev1.LabelQueueName],
			fmt.Sprintf("a job queued in Kueue has at most %d pod sets (the master and %d worker sets); this one has %d",
				maxQueuedPodSets, maxQueuedPodSets-1, len(sets))))
	}
	for _, ps := range sets[1:] {
		if ps.Name == sets[0].Name {
			errs = append(errs, field.Invalid(field.NewPath("spec", "workerSets").Key(ps.Name), ps.Name,
				fmt.Sprintf("a job queued in Kueue cannot have a worker set named %q: that is its master's pod set in the Workload", ps.Name)))
		}
	}
	return errs
}

// managedByWarnings says, when a job is created, that runPolicy.managedBy gives it to another
// controller: troupe then does nothing with it, which must never go unsaid.
func managedByWarnings(job queuedJob) admission.Warnings {
	switch {
	case troupev1.DispatchedByMultiKueue(job):
		if _, ok := troupev1.Queued(job.GetLabels()); !ok {
			return admission.Warnings{fmt.Sprintf("spec.managedBy: %q hands this job to Kueue's MultiKueue, which dispatches only a job "+
				"queued in a LocalQueue (label %s) whose ClusterQueue has a MultiKueue admission check: without the label no cluster runs it",
				troupev1.ManagedByMultiKueue, troupev1.LabelQueueName)}
		}
		return nil
	case !troupev1.ManagedElsewhere(job):
		return nil
	}
	path := "spec.managedBy"
	if job.JobManagedBy() == nil {
		path = "spec.runPolicy.managedBy"
	}
	return admission.Warnings{fmt.Sprintf("%s: %q hands this job to another controller: troupe creates nothing for it and writes no status; "+
		"leave managedBy unset (or %q) for troupe to run it", path, troupev1.Controller(job), troupev1.ManagedByTroupeOperator)}
}

// validateQueueUpdate refuses a change of spec.managedBy or runPolicy.managedBy (the CRD refuses it too, but not
// when the stored job has no runPolicy at all), and a change of the job's LocalQueue while the
// stored job is not suspended, as Kueue refuses it for its own kinds: the Workload of a running
// job holds its quota until the job ends, and a job added to a queue while it runs would be
// stopped.
func validateQueueUpdate(old, job queuedJob) field.ErrorList {
	errs := immutable(field.NewPath("spec", "runPolicy", "managedBy"),
		ptr.Deref(old.JobRunPolicy().ManagedBy, ""), ptr.Deref(job.JobRunPolicy().ManagedBy, ""))
	errs = append(errs, immutable(field.NewPath("spec", "managedBy"), ptr.Deref(old.JobManagedBy(), ""), ptr.Deref(job.JobManagedBy(), ""))...)
	was, now := old.GetLabels()[troupev1.LabelQueueName], job.GetLabels()[troupev1.LabelQueueName]
	if was != now && !ptr.Deref(old.JobRunPolicy().Suspend, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "labels").Key(troupev1.LabelQueueName), now,
			fmt.Sprintf("cannot change while the job is not suspended (was %q)", was)))
	}
	return errs
}
