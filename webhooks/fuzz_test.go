package webhooks

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/randfill"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// filler turns fuzz input into a job: small lists and maps, half the pointers nil, so that
// random jobs reach every branch of defaulting and validation in reasonable time.
func filler(data []byte) *randfill.Filler {
	return randfill.NewFromGoFuzz(data).NilChance(0.5).NumElements(0, 2).MaxDepth(12)
}

var fuzzOptions = Options{DefaultGang: troupev1.GangNone}

// checkDefaulting asserts the properties every kind's admission keeps: defaulting and validation
// never panic, defaulting twice equals defaulting once, and defaulting a valid job keeps it valid.
func checkDefaulting[T any](t *testing.T, job T, clone func(T) T, def func(T), validate func(T) int) {
	validBefore := validate(job) == 0
	once := clone(job)
	def(once)
	twice := clone(once)
	def(twice)
	if !equality.Semantic.DeepEqual(once, twice) {
		t.Fatalf("defaulting is not idempotent:\nonce:  %+v\ntwice: %+v", once, twice)
	}
	if validBefore && validate(once) != 0 {
		t.Fatalf("defaulting made a valid job invalid: %v", validate(once))
	}
}

func FuzzChainerJobAdmission(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		job := &troupev1.ChainerJob{}
		filler(data).Fill(job)
		checkDefaulting(t, job, (*troupev1.ChainerJob).DeepCopy,
			func(j *troupev1.ChainerJob) { j.SetDefaults(fuzzOptions.Defaults()) },
			func(j *troupev1.ChainerJob) int { return len(ValidateChainerJob(j)) })
	})
}

func FuzzMPIJobAdmission(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, data []byte) {
		job := &troupev1.MPIJob{}
		filler(data).Fill(job)
		checkDefaulting(t, job, (*troupev1.MPIJob).DeepCopy,
			func(j *troupev1.MPIJob) { j.SetDefaults(fuzzOptions.Defaults()) },
			func(j *troupev1.MPIJob) int { return len(ValidateMPIJob(j)) })
	})
}

func FuzzHorovodJobAdmission(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, data []byte) {
		job := &troupev1.HorovodJob{}
		filler(data).Fill(job)
		checkDefaulting(t, job, (*troupev1.HorovodJob).DeepCopy,
			func(j *troupev1.HorovodJob) { j.SetDefaults(fuzzOptions.Defaults()) },
			func(j *troupev1.HorovodJob) int { return len(ValidateHorovodJob(j)) })
	})
}

// A valid job with fuzzed knobs: the properties are checked near the boundary between valid
// and invalid, where random whole objects rarely land.
func FuzzChainerJobKnobs(f *testing.F) {
	f.Add("mn", "ws0", int32(2), int32(1), int64(0), int32(6), uint8(0), int32(0))
	f.Add("a-very-long-job-name-of-forty-characters", "w", int32(10), int32(0), int64(4), int32(-1), uint8(1), int32(3))
	f.Fuzz(func(t *testing.T, name, set string, replicas, slots int32, gpus int64, backoff int32, transport uint8, minAvailable int32) {
		job := &troupev1.ChainerJob{}
		job.Name = name
		job.Spec.Master.Template = chainerTemplate(0)
		ws := troupev1.ChainerWorkerSet{Replicas: &replicas, Template: chainerTemplate(gpus)}
		if slots != 0 {
			ws.MPIConfig = &troupev1.MPIConfig{Slots: &slots}
		}
		job.Spec.WorkerSets = map[string]troupev1.ChainerWorkerSet{set: ws}
		if backoff != 6 {
			job.Spec.RunPolicy.BackoffLimit = &backoff
		}
		job.Spec.Transport = []troupev1.MPITransport{"", troupev1.MPITransportSSH, troupev1.MPITransportKubeExec, "Telnet"}[transport%4]
		if minAvailable != 0 {
			job.Spec.SchedulingPolicy.MinAvailable = &minAvailable
		}
		checkDefaulting(t, job, (*troupev1.ChainerJob).DeepCopy,
			func(j *troupev1.ChainerJob) { j.SetDefaults(fuzzOptions.Defaults()) },
			func(j *troupev1.ChainerJob) int { return len(ValidateChainerJob(j)) })
	})
}
