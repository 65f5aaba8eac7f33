package engine

import (
	"testing"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func TestHoldCreates(t *testing.T) {
	tests := map[string]struct {
		ended bool
		obs   Observed
		want  bool
	}{
		"a running job with nothing in the way":                    {},
		"ended: a finished job is never started again":             {ended: true, want: true},
		"a child's name is taken":                                  {obs: Observed{Conflicts: []childRef{{Kind: "Service", Name: "j"}}}, want: true},
		"a Secret of the user's is missing":                        {obs: Observed{SecretProblems: []string{"Secret ssh not found"}}, want: true},
		"a generated Secret holds foreign data":                    {obs: Observed{Secrets: secretIntegrity{checked: true, Tampered: []string{"j-ssh"}}}, want: true},
		"a generated Secret was deleted after the start":           {obs: Observed{Secrets: secretIntegrity{checked: true, Lost: []string{"j-ssh"}}}, want: true},
		"pods refused by the API server do not hold the rest back": {obs: Observed{PodCreateFailures: []string{"quota"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := holdCreates(tc.ended, &tc.obs); got != tc.want {
				t.Errorf("holdCreates = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanVerdictIsTheJobs(t *testing.T) {
	for _, tc := range []struct {
		prev, observed, want troupev1.JobPhase
	}{
		{prev: troupev1.JobRunning, observed: "", want: ""},
		{prev: troupev1.JobRunning, observed: troupev1.JobSucceeded, want: troupev1.JobSucceeded},
		// A finished job stays as it ended, whatever its master Job says later.
		{prev: troupev1.JobFailed, observed: troupev1.JobSucceeded, want: troupev1.JobFailed},
		{prev: troupev1.JobSucceeded, observed: "", want: troupev1.JobSucceeded},
	} {
		obs := &Observed{Verdict: tc.observed}
		got := verdict(&troupev1.JobStatus{Phase: tc.prev}, obs)
		if got != tc.want {
			t.Errorf("verdict(prev %s, observed %q) = %q, want %q", tc.prev, tc.observed, got, tc.want)
		}
		if ended := (Plan{Verdict: got}).Ended(); ended != (tc.want != "") {
			t.Errorf("Plan{Verdict: %q}.Ended() = %v", got, ended)
		}
	}
}
