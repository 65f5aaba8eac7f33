package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// newSuspendCommand is `suspend` (suspend true) or `resume` (suspend false).
func newSuspendCommand(o *options, suspend bool) *cobra.Command {
	verb, done, short := "resume", "resumed", "Resume a suspended job: clear spec.runPolicy.suspend"
	if suspend {
		verb, done, short = "suspend", "suspended", "Suspend a job: set spec.runPolicy.suspend (its pods stop, the job stays)"
	}
	var force bool
	cmd := &cobra.Command{
		Use:     verb + " (NAME | KIND/NAME)",
		Short:   short,
		Example: "  kubectl troupe " + verb + " mpijob/pi",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, j, err := o.findJob(cmd, args[0])
			if err != nil {
				return err
			}
			if queue, ok := troupev1.Queued(j.obj.GetLabels()); ok {
				// Kueue resumes a queued job once it admits it within its queue's quota; a resume
				// from here would run it outside the quota.
				if !suspend && !force {
					return fmt.Errorf("%s waits in Kueue's LocalQueue %q, which resumes it once it admits it: "+
						"resuming it here would run it outside the queue's quota (--force resumes it anyway)", j.ref(), queue)
				}
				_, _ = fmt.Fprintf(o.streams.ErrOut, "Warning: %s waits in Kueue's LocalQueue %q, which sets spec.runPolicy.suspend itself: "+
					"Kueue may %s it again\n", j.ref(), queue, map[bool]string{true: "resume", false: "suspend"}[suspend])
			}
			changed, err := setSuspend(cmd, s.client, j.obj, suspend)
			if apierrors.IsForbidden(err) {
				// Reading the job took view; writing it takes edit.
				return fmt.Errorf("%s %s: you may not patch %ss.%s in namespace %q (Kubernetes' edit or admin role, "+
					"or troupe-edit, grants it): %w", verb, j.ref(), strings.ToLower(j.kind.Name), j.kind.GVK.Group, j.obj.GetNamespace(), err)
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w", verb, j.ref(), err)
			}
			if !changed {
				done += " (no change)"
			}
			_, err = fmt.Fprintf(o.streams.Out, "%s %s\n", j.ref(), done)
			return err
		},
	}
	if !suspend {
		cmd.Flags().BoolVar(&force, "force", false, "resume a job that waits in a Kueue LocalQueue (Kueue resumes it once admitted)")
	}
	return cmd
}

// setSuspend writes the job's runPolicy.suspend with a JSON merge patch computed from the
// kind's Go type, so it lands wherever the kind keeps its run policy; it reports whether the
// job changed. Resuming writes false, as the field's documentation says, rather than removing it.
func setSuspend(cmd *cobra.Command, c client.Client, obj engine.Object, suspend bool) (bool, error) {
	q, ok := obj.(troupev1.QueuedJob)
	if !ok {
		return false, fmt.Errorf("%T has no run policy", obj)
	}
	if ptr.Deref(q.JobRunPolicy().Suspend, false) == suspend {
		return false, nil
	}
	orig := obj.DeepCopyObject().(engine.Object)
	q.JobRunPolicy().Suspend = ptr.To(suspend)
	return true, c.Patch(cmd.Context(), obj, client.MergeFrom(orig))
}
