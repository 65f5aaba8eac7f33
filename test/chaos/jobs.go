package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
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
	// Sets are the replicas of each worker set: one to three for a kind whose sets are named
	// (ChainerJob), one for the others.
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

// shapes draws n jobs from seed: the registered kinds in turn, the rest at random. Jobs are
// created over window; masters run between minRun and maxRun.
func shapes(seed uint64, n int, window, minRun, maxRun time.Duration) []shape {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	all := kinds.All()
	var out []shape
	for i := range n {
		k := all[i%len(all)]
		s := shape{Kind: k.Name}
		s.Name = fmt.Sprintf("%s-%03d", strings.ToLower(strings.TrimSuffix(k.Name, "Job")), i)
		sets := 1
		if workerSetsOf(k) > 1 {
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

// object is the job of shape s in namespace ns: its kind's Sample.
func (s shape) object(ns string) engine.Object {
	return s.objectWith(ns, s.Sets)
}

func (s shape) objectWith(ns string, sets []int32) engine.Object {
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
	return kindNamed(s.Kind).Sample(kinds.Sample{Name: s.Name, Namespace: ns, Master: master, Image: image,
		WorkerSets: sets, RunPolicy: run, SchedulingPolicy: sched})
}

// scalePatch is the merge patch that scales the first worker set to n: the difference between
// the job's Sample and the Sample with that set's replicas n, so it is written in the kind's
// own spec.
func (s shape) scalePatch(n int32) (string, error) {
	scaled := append([]int32{n}, s.Sets[1:]...)
	before, err := json.Marshal(s.object(""))
	if err != nil {
		return "", err
	}
	after, err := json.Marshal(s.objectWith("", scaled))
	if err != nil {
		return "", err
	}
	patch, err := jsonpatch.CreateMergePatch(before, after)
	return string(patch), err
}

const resumePatch = `{"spec":{"runPolicy":{"suspend":false}}}`

// kindNamed is the registered kind named name.
func kindNamed(name string) kinds.Kind {
	for _, k := range kinds.All() {
		if k.Name == name {
			return k
		}
	}
	panic(fmt.Sprintf("no registered kind %q", name))
}

// workerSetsOf is how many worker sets a job of kind k can have, up to three: those of its
// Sample given three (a kind of one set makes one), counted as Kueue's pod sets without the
// master's.
func workerSetsOf(k kinds.Kind) int {
	job := k.Sample(kinds.Sample{Name: "count", Image: image, WorkerSets: []int32{1, 1, 1}})
	return len(job.(troupev1.QueuedJob).PodSets()) - 1
}
