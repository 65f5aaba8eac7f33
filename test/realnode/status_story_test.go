package realnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// TestStatusStory: every version of a ChainerJob's status on a real kubelet (its launcher
// waits for its worker, as MPI launchers do), as a watch from its creation receives them
// (kubectl get --raw ...?watch=true), until the end of its released worker reached it. Its
// phases come in order, Pending, Running, Succeeded, none twice; once it has succeeded no
// version says a pod failed (the scale-down that releases the workers stops them, and a worker
// stopped so may end Failed); and the number of status writes the story took is logged, a
// figure for docs/performance.md (once per phase where the pods start within the 5 s that
// progress waits for a write, and once for the released worker's end; 9 before).
func TestStatusStory(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	ns := namespace(t, "realnode-story")
	describeOnFailure(t, ns)

	// The worker exits 1 when the release stops it, as many programs do on SIGTERM: its pod
	// ends Failed after the job has succeeded.
	job := realNodeChainerJob("story", "", "hostname; sleep 5", `trap "exit 1" TERM; while true; do sleep 1 & wait; done`)
	rv := strings.TrimSpace(mustKubectl(t, job, "create", "-n", ns, "-f", "-", "-o", "jsonpath={.metadata.resourceVersion}"))
	// A watch from the version the create returned receives every later version, however
	// late it starts.
	var stream bytes.Buffer // read once the watch has stopped (Wait ends its copying)
	watch := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "--raw", fmt.Sprintf(
		"/apis/troupe.dev/v1alpha1/namespaces/%s/chainerjobs?watch=true&fieldSelector=metadata.name%%3Dstory&resourceVersion=%s", ns, rv))
	watch.Stdout = &stream
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	defer stop()

	if _, err := waitCondition(t, ns, "chainerjob.troupe.dev/story", "Succeeded", 5*time.Minute); err != nil {
		t.Fatalf("the job did not succeed: %v", err)
	}
	// The released workers' end reaches the status (counts wait up to 5 s for a write).
	waitJSONPath(t, ns, "chainerjob.troupe.dev/story", "{.status.aggregate.running}", "0", time.Minute)
	stop()

	var phases []troupev1.JobPhase
	writes := 0
	prev := &troupev1.JobStatus{} // the job as created
	for _, v := range readVersions(t, &stream) {
		st := &v.Status
		if !equality.Semantic.DeepEqual(prev, st) {
			writes++
		}
		prev = st
		if st.Phase != "" && (len(phases) == 0 || phases[len(phases)-1] != st.Phase) {
			phases = append(phases, st.Phase)
		}
		if st.Phase == troupev1.JobSucceeded && meta.IsStatusConditionTrue(st.Conditions, troupev1.ConditionReplicaFailure) {
			c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionReplicaFailure)
			t.Errorf("version %s of the succeeded job says ReplicaFailure %s: %s", v.ResourceVersion, c.Reason, c.Message)
		}
	}
	want := []troupev1.JobPhase{troupev1.JobPending, troupev1.JobRunning, troupev1.JobSucceeded}
	if !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	t.Logf("the job's story took %d status writes: phases %v", writes, phases)
}

// readVersions decodes the versions of the job in a watch's stream of events.
func readVersions(t *testing.T, stream io.Reader) []troupev1.ChainerJob {
	t.Helper()
	var out []troupev1.ChainerJob
	dec := json.NewDecoder(stream)
	for {
		var ev struct {
			Type   string              `json:"type"`
			Object troupev1.ChainerJob `json:"object"`
		}
		err := dec.Decode(&ev)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // the end, or an event cut by the stop
			break
		}
		if err != nil {
			t.Fatalf("decode the watch's stream: %v", err)
		}
		if ev.Type != "MODIFIED" {
			t.Fatalf("a watch event %s of the job; want its modifications only", ev.Type)
		}
		out = append(out, ev.Object)
	}
	return out
}
