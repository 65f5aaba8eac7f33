package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The T9k guide's debug examples, on its mpi-example: what the launcher and the workers run.
func TestMPIJobDebugMode(t *testing.T) {
	tests := map[string]struct {
		transport      troupev1.MPITransport
		specs          []troupev1.DebugReplicaSpec
		wantLauncher   string
		wantLaunchInit bool
		wantWorker     string
	}{
		"example 2, defaults: the launcher sleeps, workers run sshd": {
			wantLauncher: "sleep inf", wantLaunchInit: true,
			wantWorker: "/usr/sbin/sshd -D -e -f /etc/troupe/mpi/sshd_config",
		},
		"example 1: workers skip init containers and sleep": {
			specs:        []troupev1.DebugReplicaSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"sleep", "inf"}}},
			wantLauncher: "sleep inf", wantLaunchInit: true, wantWorker: "sleep inf",
		},
		"KubeExec: workers sleep by default": {
			transport:    troupev1.MPITransportKubeExec,
			wantLauncher: "sleep inf", wantLaunchInit: true, wantWorker: "sleep inf",
		},
		"a launcher without its wait": {
			specs:        []troupev1.DebugReplicaSpec{{Type: "launcher", SkipInitContainer: true, Command: []string{"bash", "-c", "sleep 3600"}}},
			wantLauncher: "bash -c sleep 3600", wantWorker: "/usr/sbin/sshd -D -e -f /etc/troupe/mpi/sshd_config",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := t9kExample(t)
			job.Spec.Transport = tc.transport
			job.Spec.RunMode = &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true, ReplicaSpecs: tc.specs}}
			s, err := describeMPIJob(t, job)
			if err != nil {
				t.Fatal(err)
			}
			launcher := engine.BuildMasterJob(s).Spec.Template.Spec
			if got := strings.Join(launcher.Containers[0].Command, " "); got != tc.wantLauncher || launcher.Containers[0].Args != nil {
				t.Errorf("launcher runs %q %q, want %q: no mpirun", got, launcher.Containers[0].Args, tc.wantLauncher)
			}
			if hasInit := len(launcher.InitContainers) == 1; hasInit != tc.wantLaunchInit {
				t.Errorf("launcher init containers = %v, want the wait: %v", launcher.InitContainers, tc.wantLaunchInit)
			} else if hasInit && !strings.Contains(strings.Join(launcher.InitContainers[0].Args, " "), "--best-effort") {
				t.Errorf("launcher wait args = %v, want --best-effort: a debug launcher comes up whatever its workers run", launcher.InitContainers[0].Args)
			}
			worker := engine.BuildWorkerStatefulSet(s, &s.WorkerSets[0], false).Spec.Template.Spec.Containers[0]
			if got := strings.Join(worker.Command, " "); got != tc.wantWorker {
				t.Errorf("worker runs %q, want %q", got, tc.wantWorker)
			}
		})
	}
}

// The guide's pause example: paused, then resumed with the worker's resume spec.
func TestMPIJobPauseAndResumeSpecs(t *testing.T) {
	job := t9kExample(t)
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{
		{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}},
	}}}
	s, err := describeMPIJob(t, job)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.RunMode{
		MasterType: "launcher", Pause: true,
		Resume: &engine.ReplicaOverrides{Worker: engine.ReplicaOverride{SkipInitContainers: true, Command: []string{"/usr/bin/sshd"}}},
	}
	if diff := cmp.Diff(want, s.RunMode); diff != "" {
		t.Errorf("run mode (-want +got):\n%s", diff)
	}
	s.Plan.Pause = true // as the engine decides for a job that has not finished
	for _, c := range engine.Children(s, engine.WorkersReleased(s, "")) {
		if c.GetName() == "mpi-example-launcher" {
			t.Errorf("a paused job has a launcher Job")
		}
	}
	s.RunMode.Pause, s.Plan.Pause, s.Plan.WasPaused = false, false, true
	launcher := engine.BuildMasterJob(s).Spec.Template.Spec.Containers[0]
	if !strings.HasPrefix(strings.Join(launcher.Command, " "), "mpirun --prefix /usr/local") {
		t.Errorf("resumed launcher runs %v, want its mpirun line (no launcher resume spec)", launcher.Command)
	}
	if got := engine.BuildWorkerStatefulSet(s, &s.WorkerSets[0], false).Spec.Template.Spec.Containers[0].Command; !cmp.Equal(got, []string{"/usr/bin/sshd"}) {
		t.Errorf("resumed worker runs %v, want /usr/bin/sshd", got)
	}
}

// The T9k scheduler's queue and priority reach the PodGroup and the pods.
func TestMPIJobT9kScheduler(t *testing.T) {
	job := t9kExample(t)
	job.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Queue: "default", Priority: ptr.To[int32](50)}}
	job.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangVolcano)
	s := &engine.Spec{Name: job.Name, Namespace: job.Namespace}
	opts := Options{AgentImage: "agent:1", AvailableGangs: map[troupev1.GangProvider]bool{troupev1.GangVolcano: true}, VolcanoScheduler: "volcano"}
	if err := (MPIJob{opts}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	if s.SchedulingPolicy.Queue != "default" || s.SchedulingPolicy.PriorityClassName != "t9k-priority-50" {
		t.Errorf("scheduling policy = %+v, want queue default and PriorityClass t9k-priority-50", s.SchedulingPolicy)
	}
	if pc := engine.BuildMasterJob(s).Spec.Template.Spec.PriorityClassName; pc != "t9k-priority-50" {
		t.Errorf("launcher priority class = %q, want t9k-priority-50", pc)
	}
	pg := engine.BuildGangObjects(s)
	if len(pg) != 1 || pg[0].(*volcanov1beta1.PodGroup).Spec.Queue != "default" {
		t.Errorf("PodGroup = %v, want queue default", pg)
	}
}

// A ChainerJob in debug mode: the master (rank 0) sleeps instead of running mpiexec; the
// workers of every set sleep (KubeExec, the ChainerJob default); the master's wait is best
// effort. Its resume specs address the master and the workers.
func TestChainerJobRunModes(t *testing.T) {
	job := testutil.MakeChainerJob("mn", "ml").WorkerSet("ws0", 2).WorkerSet("ws1", 1).Obj()
	job.Spec.RunMode = &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true}}
	s := &engine.Spec{Name: job.Name, Namespace: job.Namespace}
	if err := (ChainerJob{Options{AgentImage: "agent:1"}}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	master := engine.BuildMasterJob(s).Spec.Template.Spec
	if got := master.Containers[0].Command; !cmp.Equal(got, []string{"sleep", "inf"}) || !strings.Contains(strings.Join(master.InitContainers[0].Args, " "), "--best-effort") {
		t.Errorf("debug master runs %v with wait %v, want sleep inf and a best-effort wait", got, master.InitContainers[0].Args)
	}
	for i := range s.WorkerSets {
		if got := engine.BuildWorkerStatefulSet(s, &s.WorkerSets[i], false).Spec.Template.Spec.Containers[0].Command; !cmp.Equal(got, []string{"sleep", "inf"}) {
			t.Errorf("debug worker set %s runs %v, want sleep inf", s.WorkerSets[i].Name, got)
		}
	}

	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{
		{Type: "master", Command: []string{"mpiexec", "-n", "3", "python3", "train.py", "--resume"}},
	}}}
	s = &engine.Spec{Name: job.Name, Namespace: job.Namespace}
	if err := (ChainerJob{Options{AgentImage: "agent:1"}}).Describe(job, s); err != nil {
		t.Fatal(err)
	}
	want := &engine.ReplicaOverrides{Master: engine.ReplicaOverride{Command: []string{"mpiexec", "-n", "3", "python3", "train.py", "--resume"}}}
	if diff := cmp.Diff(want, s.RunMode.Resume); diff != "" || !s.RunMode.Pause || s.RunMode.MasterType != "" {
		t.Errorf("ChainerJob run mode %+v, want paused, master type master, resume (-want +got):\n%s", s.RunMode, diff)
	}
}
