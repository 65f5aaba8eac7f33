package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// RunMode is how a job's replicas run besides their templates: debug mode replaces what they
// run, pause deletes them while keeping the job, and a job that was paused runs its resume
// overrides from then on. The adapter fills Debug, Pause, Resume and MasterType from its kind's
// spec; the engine fills what it observes.
type RunMode struct {
	// MasterType is the master's replica type in status.tasks ("launcher" or "master");
	// empty is "master".
	MasterType troupev1.ReplicaType
	// Debug, when set, replaces what the replicas run, whatever else is asked.
	Debug *ReplicaOverrides
	// Pause asks to delete the master Job and scale the worker sets to zero; the job and its
	// other children stay. It has no effect on a job that has finished (Plan.Pause says whether
	// it is in force).
	Pause bool
	// Resume is applied to the replicas from the moment the job is paused on, so that they
	// come back with it; nil resumes them as their templates say.
	Resume *ReplicaOverrides
}

// ReplicaOverrides are the overrides of each replica type.
type ReplicaOverrides struct {
	Master ReplicaOverride
	Worker ReplicaOverride
}

// ReplicaOverride changes what one replica type's pods run.
type ReplicaOverride struct {
	// SkipInitContainers removes every init container, the backend's (a launcher's wait)
	// included.
	SkipInitContainers bool
	// Command replaces the main container's command; nil keeps it.
	Command []string
	// Args replace the main container's args; nil keeps them, an empty list drops them.
	Args []string
}

// Paused reports whether the job's replicas are to be deleted now (Plan.Pause).
func (s *Spec) Paused() bool { return s.Plan.Pause }

// masterWanted reports whether the master Job is a desired child now.
func (s *Spec) masterWanted() bool {
	return !s.Plan.Pause && !s.Plan.HoldMaster && !s.Plan.Restart.holdsMaster()
}

// overrides returns the overrides in force: debug mode's, else the resume overrides of a job
// that is or was paused.
func (s *Spec) overrides() *ReplicaOverrides {
	switch {
	case s.RunMode.Debug != nil:
		return s.RunMode.Debug
	case s.Plan.Pause || s.Plan.WasPaused:
		return s.RunMode.Resume
	}
	return nil
}

// applyRunMode changes a pod template of the master (ws == nil) or of a worker set as the run
// mode says. It runs after the backend's and the gang's decoration, so an override wins over
// them (for example the transport's sshd command) and skipping init containers removes the
// backend's too. The command goes to the main container; a master without one (a launcher of
// the user's with containers of other names) gets it in its first container.
func (s *Spec) applyRunMode(tmpl *corev1.PodTemplateSpec, ws *WorkerSet) {
	o := s.overrides()
	if o == nil {
		return
	}
	ov := o.Worker
	if ws == nil {
		ov = o.Master
	}
	if ov.SkipInitContainers {
		// Skipping init containers skips the job's own and the launcher's wait, never the
		// clones of appCodesToSync: without them the code's mount would be empty.
		tmpl.Spec.InitContainers = slices.DeleteFunc(tmpl.Spec.InitContainers, func(c corev1.Container) bool {
			return !s.CodeSync.isCloner(c.Name)
		})
		if len(tmpl.Spec.InitContainers) == 0 {
			tmpl.Spec.InitContainers = nil
		}
	}
	c := mainContainer(tmpl, s.MainContainer, ws == nil)
	if c == nil {
		return
	}
	if ov.Command != nil {
		c.Command = append([]string(nil), ov.Command...)
	}
	if ov.Args != nil {
		c.Args = append([]string(nil), ov.Args...)
		if len(c.Args) == 0 {
			c.Args = nil
		}
	}
}

func mainContainer(tmpl *corev1.PodTemplateSpec, name string, orFirst bool) *corev1.Container {
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == name {
			return &tmpl.Spec.Containers[i]
		}
	}
	if orFirst && len(tmpl.Spec.Containers) > 0 {
		return &tmpl.Spec.Containers[0]
	}
	return nil
}

// WasPaused reports whether a job's status says it has been paused: its Paused condition is
// True, or says it resumed.
func WasPaused(st *troupev1.JobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionPaused)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == troupev1.ReasonResumed)
}

// masterType is the master's replica type in status.tasks.
func (s *Spec) masterType() troupev1.ReplicaType {
	if s.RunMode.MasterType == "" {
		return troupev1.ReplicaMaster
	}
	return s.RunMode.MasterType
}
