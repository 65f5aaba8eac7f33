package progress

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestParsePath(t *testing.T) {
	for path, want := range map[string][3]string{
		"/progress/v1/namespaces/team-a/mpijob/pi": {"team-a", "mpijob", "pi"},
		"/progress/v1/namespaces/team-a/mpijob":    {},
		"/progress/v1/namespaces/a/b/c/d":          {},
		"/progress/v1/namespaces//mpijob/pi":       {},
		"/metrics":                                 {},
	} {
		ns, kind, name, ok := parsePath(path)
		if got := [3]string{ns, kind, name}; got != want || ok != (want != [3]string{}) {
			t.Errorf("parsePath(%q) = %v %t, want %v", path, got, ok, want)
		}
	}
}

func TestReportValidation(t *testing.T) {
	many := map[string]float64{}
	for i := range 17 {
		many["m"+strings.Repeat("x", i)] = 1
	}
	for _, tc := range []struct {
		name string
		r    Report
		want string // in the error, "" for none
	}{
		{"a report", Report{Current: 3, Total: 10, Unit: "epochs", Metrics: map[string]float64{"loss": 0.1, "top_1": 0.9}}, ""},
		{"negative", Report{Current: -1}, "negative"},
		{"unit", Report{Current: 1, Unit: "Steps!"}, "unit"},
		{"message", Report{Current: 1, Message: strings.Repeat("x", 257)}, "message"},
		{"too many metrics", Report{Current: 1, Metrics: many}, "at most 16"},
		{"a metric name", Report{Current: 1, Metrics: map[string]float64{"eval/loss": 1}}, "lower-case"},
	} {
		err := tc.r.validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A job's reports are taken at ReportsPerSecond with bursts of ReportBurst, and its rate is
// measured from the first report of the run (anew when current goes back).
func TestTakeAndRate(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s := &Server{clock: clock, jobs: map[types.UID]*jobReports{}}
	taken := 0
	for i := range 10 {
		if s.take("j", Report{Current: int64(i)}) {
			taken++
		}
	}
	if taken != ReportBurst {
		t.Errorf("10 reports at once: %d taken, want %d", taken, ReportBurst)
	}
	clock.SetTime(clock.Now().Add(10 * time.Second))
	if !s.take("j", Report{Current: 204, Total: 1000}) {
		t.Fatal("a report 10 s later refused")
	}
	// From step 0 at the start to 204 ten seconds later: 20.4 steps a second.
	if got, _ := s.Latest("j"); got.Rate != 20.4 || got.Current != 204 || got.Total != 1000 {
		t.Errorf("latest %+v, want 204 of 1000 at 20.4/s", got)
	}
	clock.SetTime(clock.Now().Add(10 * time.Second))
	s.take("j", Report{Current: 5})
	if got, _ := s.Latest("j"); got.Rate != 0 {
		t.Errorf("after the training started again: rate %v, want none yet", got.Rate)
	}
}

func TestBuckets(t *testing.T) {
	var b buckets
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	n := 0
	for range 20 {
		if b.take("pod", now) {
			n++
		}
	}
	if n != ReportBurst || !b.take("other", now) {
		t.Errorf("a pod's burst: %d taken, want %d, and another pod's own", n, ReportBurst)
	}
	if !b.take("pod", now.Add(time.Second)) || b.take("pod", now.Add(time.Second)) {
		t.Error("a second later: want one more report taken, and one only")
	}
}
