package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func runModeSpec() *Spec {
	s := testSpec()
	s.MainContainer = "main"
	s.Backend = initBackend{}
	return s
}

// initBackend adds an init container to the master, as the MPI backend's wait does.
type initBackend struct{ envBackend }

func (b initBackend) DecoratePod(s *Spec, ws *WorkerSet, tmpl *corev1.PodTemplateSpec) {
	b.envBackend.DecoratePod(s, ws, tmpl)
	if ws == nil {
		tmpl.Spec.InitContainers = append(tmpl.Spec.InitContainers, corev1.Container{Name: "wait", Image: "agent:1"})
	}
}

type commands struct {
	Init          []string
	Command, Args []string
}

func commandsOf(tmpl *corev1.PodTemplateSpec) commands {
	var c commands
	for _, ic := range tmpl.Spec.InitContainers {
		c.Init = append(c.Init, ic.Name)
	}
	c.Command, c.Args = tmpl.Spec.Containers[0].Command, tmpl.Spec.Containers[0].Args
	return c
}

func TestRunModeOverrides(t *testing.T) {
	userMaster := commands{Init: []string{"wait"}, Command: []string{"train"}, Args: []string{"--epochs=3"}}
	userWorker := commands{Command: []string{"serve"}}
	resume := &ReplicaOverrides{
		Master: ReplicaOverride{Args: []string{"--resume"}},
		Worker: ReplicaOverride{SkipInitContainers: true, Command: []string{"/usr/bin/sshd"}},
	}
	tests := map[string]struct {
		mode         RunMode
		plan         Plan // what the engine decided beyond the spec
		wantMaster   commands
		wantWorker   commands
		masterWanted bool
	}{
		"no run mode: the templates as written": {
			wantMaster: userMaster, wantWorker: userWorker, masterWanted: true,
		},
		"debug: the debug commands, init containers kept unless skipped": {
			mode: RunMode{Debug: &ReplicaOverrides{
				Master: ReplicaOverride{Command: []string{"sleep", "inf"}, Args: []string{}},
				Worker: ReplicaOverride{SkipInitContainers: true, Command: []string{"sleep", "inf"}, Args: []string{}},
			}},
			wantMaster:   commands{Init: []string{"wait"}, Command: []string{"sleep", "inf"}},
			wantWorker:   commands{Command: []string{"sleep", "inf"}},
			masterWanted: true,
		},
		"debug wins over resume specs": {
			mode:         RunMode{Debug: &ReplicaOverrides{Master: ReplicaOverride{SkipInitContainers: true}}, Resume: resume},
			plan:         Plan{WasPaused: true},
			wantMaster:   commands{Command: []string{"train"}, Args: []string{"--epochs=3"}},
			wantWorker:   userWorker,
			masterWanted: true,
		},
		"resume specs are not applied before a pause": {
			mode: RunMode{Resume: resume}, wantMaster: userMaster, wantWorker: userWorker, masterWanted: true,
		},
		"paused: no master Job, workers already carry the resume specs": {
			mode: RunMode{Pause: true, Resume: resume}, plan: Plan{Pause: true}, wantWorker: commands{Command: []string{"/usr/bin/sshd"}},
		},
		"resumed: the resume specs": {
			mode:         RunMode{Resume: resume},
			plan:         Plan{WasPaused: true},
			wantMaster:   commands{Init: []string{"wait"}, Command: []string{"train"}, Args: []string{"--resume"}},
			wantWorker:   commands{Command: []string{"/usr/bin/sshd"}},
			masterWanted: true,
		},
		"resumed while old master pods terminate: the master Job waits": {
			plan:       Plan{WasPaused: true, HoldMaster: true},
			wantWorker: userWorker,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := runModeSpec()
			s.Master.Template.Spec.Containers[0].Command = []string{"train"}
			s.Master.Template.Spec.Containers[0].Args = []string{"--epochs=3"}
			s.WorkerSets[0].Template.Spec.Containers[0].Command = []string{"serve"}
			s.RunMode, s.Plan = tc.mode, tc.plan

			var master *batchv1.Job
			for _, o := range Children(s, WorkersReleased(s, "")) {
				if j, ok := o.(*batchv1.Job); ok {
					master = j
				}
			}
			if (master != nil) != tc.masterWanted {
				t.Fatalf("master Job among the children: %v, want %v", master != nil, tc.masterWanted)
			}
			if master != nil {
				if diff := cmp.Diff(tc.wantMaster, commandsOf(&master.Spec.Template)); diff != "" {
					t.Errorf("master (-want +got):\n%s", diff)
				}
			}
			sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], WorkersReleased(s, ""))
			if diff := cmp.Diff(tc.wantWorker, commandsOf(&sts.Spec.Template)); diff != "" {
				t.Errorf("worker (-want +got):\n%s", diff)
			}
			if wantReplicas := map[bool]int32{true: 0, false: 2}[tc.mode.Pause]; *sts.Spec.Replicas != wantReplicas {
				t.Errorf("worker replicas = %d, want %d", *sts.Spec.Replicas, wantReplicas)
			}
		})
	}
}

// A launcher of the user's whose containers have other names than the main one gets the
// command in its first container; a worker without the main container is left alone.
func TestRunModeCommandWithoutMainContainer(t *testing.T) {
	s := runModeSpec()
	s.Master.Template = podTemplate("launcher")
	s.Master.Template.Spec.Containers = append(s.Master.Template.Spec.Containers, corev1.Container{Name: "sidecar", Command: []string{"tail"}})
	s.WorkerSets[0].Template = podTemplate("other")
	s.RunMode.Debug = &ReplicaOverrides{Master: ReplicaOverride{Command: []string{"sleep", "inf"}}, Worker: ReplicaOverride{Command: []string{"sleep", "inf"}}}
	job := BuildMasterJob(s)
	if got := job.Spec.Template.Spec.Containers; !cmp.Equal(got[0].Command, []string{"sleep", "inf"}) || !cmp.Equal(got[1].Command, []string{"tail"}) {
		t.Errorf("launcher containers = %+v, want the first one running sleep inf and the sidecar untouched", got)
	}
	sts := BuildWorkerStatefulSet(s, &s.WorkerSets[0], false)
	if got := sts.Spec.Template.Spec.Containers[0].Command; got != nil {
		t.Errorf("worker without the main container runs %v, want its own command", got)
	}
}

// pausingAdapter describes the restart harness's job with pause asked.
type pausingAdapter struct{ workersAdapter }

func (a pausingAdapter) Describe(job Object, s *Spec) error {
	err := a.workersAdapter.Describe(job, s)
	s.RunMode.Pause = true
	return err
}

// A job created paused (the T9k example of block 8.1) gets its children but the master Job,
// and says its children are created: the master Job, looked up and missing, is not one the
// job waits for.
func TestJobCreatedPausedHasItsChildren(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = pausingAdapter{}
	st := h.reconcile()
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized)
	if st.Phase != troupev1.JobPaused || c == nil || c.Reason != troupev1.ReasonChildrenCreated {
		t.Errorf("phase %s, Initialized %+v; want Paused with its children created", st.Phase, c)
	}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("a paused job's master Job: %v, want none", err)
	}
}
