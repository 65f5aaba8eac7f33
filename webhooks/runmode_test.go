package webhooks

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func runModeMPIJob() *troupev1.MPIJob {
	job := &troupev1.MPIJob{}
	job.Name = "mpi"
	job.Spec.Worker.Cmd = []string{"./app"}
	job.Spec.Worker.Template.Spec.Containers = []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:1"}}
	return job
}

// errorsOf reduces errors to "field: type" for compact expectations.
func errorsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+string(e.Type))
	}
	slices.Sort(out)
	return out
}

func TestValidateRunModeAndT9kScheduler(t *testing.T) {
	tests := map[string]struct {
		mutate func(*troupev1.MPIJob)
		want   []string
	}{
		"the guide's debug and pause examples": {mutate: func(j *troupev1.MPIJob) {
			j.Spec.RunMode = &troupev1.RunMode{
				Debug: &troupev1.DebugMode{Enabled: true, ReplicaSpecs: []troupev1.DebugReplicaSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"sleep", "inf"}}}},
				Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}}}},
			}
		}},
		"a ChainerJob's replica type, twice": {mutate: func(j *troupev1.MPIJob) {
			j.Spec.RunMode = &troupev1.RunMode{
				Debug: &troupev1.DebugMode{ReplicaSpecs: []troupev1.DebugReplicaSpec{{Type: "master"}}},
				Pause: &troupev1.PauseMode{ResumeSpecs: []troupev1.ResumeSpec{{Type: "launcher"}, {Type: "launcher"}}},
			}
		}, want: []string{
			"spec.runMode.debug.replicaSpecs[0].type: FieldValueNotSupported",
			"spec.runMode.pause.resumeSpecs[1].type: FieldValueDuplicate",
		}},
		"the guide's scheduler section": {mutate: func(j *troupev1.MPIJob) {
			j.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Queue: "default", Priority: ptr.To[int32](50)}}
			j.Spec.SchedulingPolicy = troupev1.SchedulingPolicy{Queue: "default", PriorityClassName: "t9k-priority-50"}
		}},
		"a scheduler section contradicting the policy": {mutate: func(j *troupev1.MPIJob) {
			j.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Queue: "research", Priority: ptr.To[int32](50)}}
			j.Spec.SchedulingPolicy = troupev1.SchedulingPolicy{Queue: "default", PriorityClassName: "high"}
		}, want: []string{
			"spec.scheduler.t9kScheduler.priority: FieldValueInvalid",
			"spec.scheduler.t9kScheduler.queue: FieldValueInvalid",
		}},
		"a negative priority": {mutate: func(j *troupev1.MPIJob) {
			j.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Priority: ptr.To[int32](-1)}}
		}, want: []string{"spec.scheduler.t9kScheduler.priority: FieldValueInvalid"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := runModeMPIJob()
			tc.mutate(job)
			if diff := cmp.Diff(tc.want, errorsOf(ValidateMPIJob(job))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// Defaulting writes the T9k scheduler's queue and priority into the scheduling policy, once,
// and leaves debug mode's defaults to the operator.
func TestDefaultT9kSchedulerAndRunMode(t *testing.T) {
	job := runModeMPIJob()
	job.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Queue: "default", Priority: ptr.To[int32](50)}}
	job.Spec.RunMode = &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true}}
	job.SetDefaults(Options{}.Defaults())
	if sp := job.Spec.SchedulingPolicy; sp.Queue != "default" || sp.PriorityClassName != "t9k-priority-50" {
		t.Errorf("schedulingPolicy = %+v, want queue default and priorityClassName t9k-priority-50", sp)
	}
	if job.Spec.RunMode.Debug.ReplicaSpecs != nil {
		t.Errorf("debug replicaSpecs = %+v, want them left out", job.Spec.RunMode.Debug.ReplicaSpecs)
	}
	again := job.DeepCopy()
	again.SetDefaults(Options{}.Defaults())
	if diff := cmp.Diff(job, again); diff != "" {
		t.Errorf("defaulting twice changed the job (-once +twice):\n%s", diff)
	}
}

func TestValidateRunModeUpdate(t *testing.T) {
	resume := []troupev1.ResumeSpec{{Type: "worker", Command: []string{"/usr/bin/sshd"}}}
	tests := map[string]struct {
		old, new *troupev1.RunMode
		want     string
	}{
		"pause toggled": {
			old: &troupev1.RunMode{Pause: &troupev1.PauseMode{ResumeSpecs: resume}},
			new: &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: resume}},
		},
		"pause added without resume specs": {new: &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true}}},
		"resume specs added": {
			new:  &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: resume}},
			want: "spec.runMode.pause.resumeSpecs: Forbidden",
		},
		"debug turned off": {
			old:  &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true}},
			new:  &troupev1.RunMode{Debug: &troupev1.DebugMode{}},
			want: "spec.runMode.debug: Forbidden",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := validateRunModeUpdate(field.NewPath("spec", "runMode"), tc.old, tc.new)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
				t.Errorf("errors = %v, want one %q", errs, tc.want)
			}
		})
	}
}
