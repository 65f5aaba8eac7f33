package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// How a simulated master behaves (hack/controlplane/pod-stages.yaml): it runs for the
// annotation's duration, then exits 0, or 1 with the label.
const (
	simOutcomeLabel  = "troupe.dev/sim-outcome"
	simDurationAnnot = "troupe.dev/sim-duration"
	image            = "chaos.local/sim:v1"
	// failBackoff is the backoffLimit of jobs set to fail: two launcher pods, then Failed.
	failBackoff = 1
)

// shape is one job of the run, drawn from the seed: both runs create the same shapes at the
// same offsets, the second one under faults.
type shape struct {
	Kind string
	Name string
	// Sets are the replicas of each worker set (MPIJob and HorovodJob have one set; a
	// ChainerJob one to three).
	Sets []int32
	Gang troupev1.GangProvider
	// Fail: the master exits 1 (twice: backoffLimit 1), and the job ends Failed.
	Fail bool
	// Duration is how long the master runs.
	Duration time.Duration
	// CreateAt is the creation's offset from the run's start.
	CreateAt time.Duration
	// ResumeAfter > 0: created suspended and resumed this long after its creation.
	ResumeAfter time.Duration
	// ScaleTo > 0: the first worker set is scaled to it ScaleAfter after creation.
	ScaleTo    int32
	ScaleAfter time.Duration
	// TTL > 0: runPolicy.ttlSecondsAfterFinished.
	TTL int32
}

// want is the phase the shape must end in.
func (s shape) want() troupev1.JobPhase {
	if s.Fail {
		return troupev1.JobFailed
	}
	return troupev1.JobSucceeded
}

// shapes draws n jobs from seed: kinds in turn, the rest at random. Jobs are created over
// window; masters run between minRun and maxRun.
func shapes(seed uint64, n int, window, minRun, maxRun time.Duration) []shape {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	prefix := map[string]string{"MPIJob": "mpi", "HorovodJob": "hvd", "ChainerJob": "cj", "PyTorchJob": "ptj"}
	var out []shape
	for i := range n {
		s := shape{Kind: kindNames[i%len(kindNames)]}
		s.Name = fmt.Sprintf("%s-%03d", prefix[s.Kind], i)
		sets := 1
		if s.Kind == "ChainerJob" {
			sets = 1 + rng.IntN(3)
		}
		for range sets {
			// Mostly small jobs, some of the full eight.
			s.Sets = append(s.Sets, int32(1+rng.IntN(4)+rng.IntN(2)*rng.IntN(5)))
		}
		switch r := rng.IntN(100); {
		case r < 15:
			s.Gang = troupev1.GangVolcano
		case r < 25:
			s.Gang = troupev1.GangCoscheduling
		}
		s.Fail = rng.IntN(100) < 20
		s.Duration = minRun + time.Duration(rng.Int64N(int64(maxRun-minRun)+1))
		s.Duration = s.Duration.Round(time.Second)
		if n > 1 {
			s.CreateAt = window * time.Duration(i) / time.Duration(n-1)
		}
		// Gang jobs are neither suspended nor scaled: their PodGroups' sizes are fixed at
		// admission, and what is tested here is the operator, not the schedulers.
		if s.Gang == "" {
			switch r := rng.IntN(100); {
			case r < 15:
				s.ResumeAfter = time.Duration(5+rng.IntN(15)) * time.Second
			case r < 30 && s.Duration >= 10*time.Second:
				s.ScaleTo = int32(1 + rng.IntN(8))
				if s.ScaleTo == s.Sets[0] {
					s.ScaleTo = s.Sets[0]%8 + 1
				}
				s.ScaleAfter = time.Duration(2+rng.IntN(int(s.Duration/time.Second)/2)) * time.Second
			}
		}
		if rng.IntN(100) < 20 {
			// Long enough that the final phase is seen before the job goes (an API server
			// restart takes a few seconds).
			s.TTL = int32(30 + rng.IntN(30))
		}
		out = append(out, s)
	}
	return out
}

// object is the job of shape s in namespace ns.
func (s shape) object(ns string) client.Object {
	master := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simDurationAnnot: s.Duration.String()}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
	}
	if s.Fail {
		master.Labels = map[string]string{simOutcomeLabel: "fail"}
	}
	run := troupev1.RunPolicy{}
	if s.Fail {
		run.BackoffLimit = ptr.To[int32](failBackoff)
	}
	if s.ResumeAfter > 0 {
		run.Suspend = ptr.To(true)
	}
	if s.TTL > 0 {
		run.TTLSecondsAfterFinished = ptr.To(s.TTL)
	}
	sched := troupev1.SchedulingPolicy{}
	if s.Gang != "" {
		sched.Gang = ptr.To(s.Gang)
	}
	meta := metav1.ObjectMeta{Name: s.Name, Namespace: ns}
	worker := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: image}}}}
	}
	switch s.Kind {
	case "ChainerJob":
		master.Spec.Containers = []corev1.Container{{Name: troupev1.ChainerMainContainer, Image: image}}
		j := &troupev1.ChainerJob{ObjectMeta: meta, Spec: troupev1.ChainerJobSpec{
			Backend: troupev1.ChainerBackendMPI, Master: troupev1.ChainerMaster{Template: master},
			WorkerSets: map[string]troupev1.ChainerWorkerSet{}, RunPolicy: run, SchedulingPolicy: sched,
		}}
		for i, n := range s.Sets {
			j.Spec.WorkerSets[setName(i)] = troupev1.ChainerWorkerSet{Replicas: ptr.To(n), Template: worker(troupev1.ChainerMainContainer)}
		}
		return j
	case "PyTorchJob":
		master.Spec.Containers = []corev1.Container{{Name: troupev1.PyTorchMainContainer, Image: image}}
		never := troupev1.ReplicaRestartNever
		return &troupev1.PyTorchJob{ObjectMeta: meta, Spec: troupev1.PyTorchJobSpec{
			PyTorchReplicaSpecs: troupev1.PyTorchReplicaSpecs{
				Master: &troupev1.ReplicaSpec{Template: master, RestartPolicy: never},
				Worker: &troupev1.ReplicaSpec{Replicas: ptr.To(s.Sets[0]), Template: worker(troupev1.PyTorchMainContainer)},
			},
			RunPolicy: run, SchedulingPolicy: sched,
		}}
	default:
		master.Spec.Containers = []corev1.Container{{Name: "launcher", Image: image}}
		container := troupev1.MPIWorkerContainer
		if s.Kind == "HorovodJob" {
			container = troupev1.HorovodMainContainer
		}
		p := troupev1.MPIProgramSpec{
			Worker:   troupev1.MPIWorker{Replicas: ptr.To(s.Sets[0]), Template: worker(container)},
			Launcher: &troupev1.MPILauncher{Template: &master}, RunPolicy: run, SchedulingPolicy: sched,
		}
		if s.Kind == "HorovodJob" {
			return &troupev1.HorovodJob{ObjectMeta: meta, Spec: troupev1.HorovodJobSpec{MPIProgramSpec: p}}
		}
		return &troupev1.MPIJob{ObjectMeta: meta, Spec: troupev1.MPIJobSpec{MPIProgramSpec: p}}
	}
}

// scalePatch is the merge patch that scales the first worker set to n.
func (s shape) scalePatch(n int32) string {
	switch s.Kind {
	case "ChainerJob":
		return fmt.Sprintf(`{"spec":{"workerSets":{%q:{"replicas":%d}}}}`, setName(0), n)
	case "PyTorchJob":
		return fmt.Sprintf(`{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":%d}}}}`, n)
	}
	return fmt.Sprintf(`{"spec":{"worker":{"replicas":%d}}}`, n)
}

const resumePatch = `{"spec":{"runPolicy":{"suspend":false}}}`

func setName(i int) string { return fmt.Sprintf("ws%d", i) }
