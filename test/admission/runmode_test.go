package admission

import (
	"context"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// warnings collects the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// The guide's scheduler section is admitted and written into the scheduling policy: the queue
// as is, the priority as the PriorityClass t9k-priority-<priority>. Without Volcano the queue
// has no effect, and the user is warned.
func TestT9kSchedulerIsMapped(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.Load[*troupev1.MPIJob](t, "../../examples/mpijob.yaml", ns)
	job.Spec.Scheduler = &troupev1.SchedulerSpec{T9kScheduler: &troupev1.T9kScheduler{Queue: "default", Priority: ptr.To[int32](50)}}

	w := &warnings{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), job); err != nil {
		t.Fatalf("the guide's scheduler section is refused: %v", err)
	}
	if sp := job.Spec.SchedulingPolicy; sp.Queue != "default" || sp.PriorityClassName != "t9k-priority-50" {
		t.Errorf("stored schedulingPolicy = %+v, want queue default and priorityClassName t9k-priority-50", sp)
	}
	if len(w.msgs) != 1 || !strings.Contains(w.msgs[0], "spec.scheduler.t9kScheduler.queue: the gang provider None has no queues") {
		t.Errorf("warnings = %q, want one saying the queue is ignored without Volcano", w.msgs)
	}
}

// Run-mode updates through the webhooks: pause toggles; debug and the resume specs are fixed.
func TestRunModeUpdates(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.Load[*troupev1.MPIJob](t, "../../examples/mpijob.yaml", ns)
	job.Spec.RunMode = &troupev1.RunMode{
		Debug: &troupev1.DebugMode{Enabled: true},
		Pause: &troupev1.PauseMode{ResumeSpecs: []troupev1.ResumeSpec{{Type: troupev1.ReplicaWorker, Command: []string{"/usr/bin/sshd"}}}},
	}
	create(t, job)
	for name, c := range map[string]struct {
		expect string
		mutate func(*troupev1.MPIJob)
	}{
		"debug turned off": {"runMode.debug", func(j *troupev1.MPIJob) { j.Spec.RunMode.Debug.Enabled = false }},
		"a resume command": {"runMode.pause.resumeSpecs", func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.ResumeSpecs[0].Command = nil }},
		"a resume spec of an unknown type": {"runMode", func(j *troupev1.MPIJob) {
			j.Spec.RunMode.Pause.ResumeSpecs[0].Type = "master"
		}},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			err := update(t, job, c.mutate)
			if err == nil || !strings.Contains(err.Error(), c.expect) {
				t.Errorf("update of %s: %v, want a refusal naming %q", name, err, c.expect)
			}
		})
	}
	for _, enabled := range []bool{true, false} {
		if err := update(t, job, func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.Enabled = enabled }); err != nil {
			t.Errorf("pause.enabled = %v refused: %v", enabled, err)
		}
	}
}
