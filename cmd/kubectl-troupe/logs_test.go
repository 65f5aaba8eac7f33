package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeLogs serves each target's log from a pipe the test writes, so a test decides when each
// line arrives and when each stream ends.
type fakeLogs struct {
	mu      sync.Mutex
	readers map[logTarget]*io.PipeReader
	writers map[logTarget]*io.PipeWriter
	refuse  map[logTarget]error
	opened  chan logTarget
}

func newFakeLogs(targets ...logTarget) *fakeLogs {
	f := &fakeLogs{readers: map[logTarget]*io.PipeReader{}, writers: map[logTarget]*io.PipeWriter{},
		refuse: map[logTarget]error{}, opened: make(chan logTarget, len(targets))}
	for _, t := range targets {
		f.readers[t], f.writers[t] = io.Pipe()
	}
	return f
}

func (f *fakeLogs) open(_ context.Context, t logTarget) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse[t]; err != nil {
		return nil, err
	}
	f.opened <- t
	return f.readers[t], nil
}

func (f *fakeLogs) write(t *testing.T, target logTarget, s string) {
	t.Helper()
	if _, err := io.WriteString(f.writers[target], s); err != nil {
		t.Fatalf("write %v: %v", target, err)
	}
}

// syncBuffer is an output the test reads while streamLogs writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitOutput waits until out holds want (the lines arrive through goroutines).
func waitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(time.Millisecond)
	}
}

var (
	launcher = logTarget{pod: "pi-launcher-x7", container: "mpi-launcher"}
	worker0  = logTarget{pod: "pi-worker-0", container: "mpi-worker"}
	worker1  = logTarget{pod: "pi-worker-1", container: "mpi-worker"}
)

// Following, every stream is read at once: lines appear as each pod writes them, interleaved
// whole (a line split over two writes stays one line), each with its pod's prefix; the command
// returns once every stream ended.
func TestFollowInterleavesWholeLines(t *testing.T) {
	f := newFakeLogs(launcher, worker0, worker1)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- streamLogs(context.Background(), out, io.Discard, f, []logTarget{launcher, worker0, worker1}, true)
	}()
	f.write(t, worker1, "rank 2 starts\n")
	waitOutput(t, out, "[pod/pi-worker-1/mpi-worker] rank 2 starts\n")
	f.write(t, launcher, "mpirun: 3 ra") // half a line: held until its end arrives
	f.write(t, worker0, "rank 1 starts\n")
	waitOutput(t, out, "[pod/pi-worker-0/mpi-worker] rank 1 starts\n")
	f.write(t, launcher, "nks\n")
	waitOutput(t, out, "[pod/pi-launcher-x7/mpi-launcher] mpirun: 3 ranks\n")
	f.write(t, worker0, "no newline at the end")
	for _, w := range f.writers {
		_ = w.Close()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "[pod/pi-worker-1/mpi-worker] rank 2 starts\n" +
		"[pod/pi-worker-0/mpi-worker] rank 1 starts\n" +
		"[pod/pi-launcher-x7/mpi-launcher] mpirun: 3 ranks\n" +
		"[pod/pi-worker-0/mpi-worker] no newline at the end\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// Many long lines written at once by every pod come out whole: no line of one pod is cut by
// another's.
func TestFollowNeverTearsLines(t *testing.T) {
	targets := []logTarget{launcher, worker0, worker1}
	f := newFakeLogs(targets...)
	out := &syncBuffer{}
	long := strings.Repeat("x", 10000) // longer than any read buffer
	var wg sync.WaitGroup
	for _, target := range targets {
		wg.Go(func() {
			for i := range 200 {
				_, _ = fmt.Fprintf(f.writers[target], "%s line %d %s\n", target.pod, i, long)
			}
			_ = f.writers[target].Close()
		})
	}
	if err := streamLogs(context.Background(), out, io.Discard, f, targets, true); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 600 {
		t.Fatalf("%d lines, want 600", len(lines))
	}
	next := map[string]int{}
	for _, l := range lines {
		var pod, container string
		var i int
		prefix, rest, _ := strings.Cut(l, " ")
		if _, err := fmt.Sscanf(strings.ReplaceAll(strings.Trim(prefix, "[]"), "/", " "), "pod %s %s", &pod, &container); err != nil {
			t.Fatalf("line without a prefix: %.80q", l)
		}
		if _, err := fmt.Sscanf(rest, pod+" line %d", &i); err != nil || !strings.HasSuffix(rest, " "+long) {
			t.Fatalf("torn line of %s: %.80q", pod, rest)
		}
		if i != next[pod] {
			t.Fatalf("%s: line %d after line %d", pod, i, next[pod]-1)
		}
		next[pod]++
	}
}

// Without -f the logs come one pod after another, in the pods' order; a pod whose log cannot
// be read is reported on stderr with its prefix, the others are still shown, and the command
// fails.
func TestLogsOneAfterAnother(t *testing.T) {
	f := newFakeLogs(launcher, worker0, worker1)
	f.refuse[worker0] = errors.New(`container "mpi-worker" in pod "pi-worker-0" is waiting to start: ContainerCreating`)
	go func() {
		for range 2 {
			switch <-f.opened {
			case launcher:
				f.write(t, launcher, "a\nb\n")
				_ = f.writers[launcher].Close()
			case worker1:
				f.write(t, worker1, "c\n")
				_ = f.writers[worker1].Close()
			}
		}
	}()
	var out, errOut bytes.Buffer
	err := streamLogs(context.Background(), &out, &errOut, f, []logTarget{launcher, worker0, worker1}, false)
	if err == nil || err.Error() != "1 of 3 logs could not be read" {
		t.Errorf("error = %v, want 1 of 3 logs could not be read", err)
	}
	want := "[pod/pi-launcher-x7/mpi-launcher] a\n[pod/pi-launcher-x7/mpi-launcher] b\n[pod/pi-worker-1/mpi-worker] c\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if want := "[pod/pi-worker-0/mpi-worker] error: container \"mpi-worker\" in pod \"pi-worker-0\" is waiting to start: ContainerCreating\n"; errOut.String() != want {
		t.Errorf("stderr = %q, want %q", errOut.String(), want)
	}
}

// Ctrl-C (a cancelled context) ends streams that are still open, and is no error.
func TestFollowEndsOnInterrupt(t *testing.T) {
	f := newFakeLogs(launcher, worker0)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- streamLogs(ctx, out, io.Discard, f, []logTarget{launcher, worker0}, true) }()
	f.write(t, launcher, "training\n")
	waitOutput(t, out, "training")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("error = %v, want none", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("streams still open after the interrupt")
	}
}

func TestLogTargets(t *testing.T) {
	pod := func(name string, containers ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		p.Spec.InitContainers = []corev1.Container{{Name: "troupe-wait"}}
		return p
	}
	pods := []corev1.Pod{pod("pi-launcher-x7", "mpi-launcher", "sidecar"), pod("pi-worker-0", "mpi-worker"), pod("pi-worker-1", "mpi-worker")}
	cases := []struct {
		container string
		want      []logTarget
		wantErr   string
	}{
		{want: []logTarget{launcher, {pod: "pi-launcher-x7", container: "sidecar"}, worker0, worker1}},
		{container: "mpi-worker", want: []logTarget{worker0, worker1}},
		{container: "troupe-wait", want: []logTarget{{"pi-launcher-x7", "troupe-wait"}, {"pi-worker-0", "troupe-wait"}, {"pi-worker-1", "troupe-wait"}}},
		{container: "nope", wantErr: `no pod of the job has a container "nope"`},
	}
	for _, c := range cases {
		got, err := logTargets(pods, c.container)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("-c %s: error %v, want %s", c.container, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(logTarget{})); diff != "" {
			t.Errorf("-c %q (-want +got):\n%s", c.container, diff)
		}
	}
	if _, err := logTargets(nil, ""); err == nil {
		t.Error("a job without pods has logs")
	}
}

func TestContainerStarted(t *testing.T) {
	status := func(phase corev1.PodPhase, s corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: s}}}}
	}
	cases := []struct {
		pod  *corev1.Pod
		want bool
	}{
		{status(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}), false},
		{status(corev1.PodPending, corev1.ContainerState{}), false},
		{status(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), true},
		{status(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}), true},
		{status(corev1.PodFailed, corev1.ContainerState{}), true},
	}
	for i, c := range cases {
		if got := containerStarted(c.pod, "c"); got != c.want {
			t.Errorf("case %d: containerStarted = %t, want %t", i, got, c.want)
		}
	}
}

// A pod's terminal escape sequences and other control characters are written escaped, so its
// log cannot move the cursor, clear or retitle the user's terminal; a line longer than
// maxLogLine comes in pieces of at most that size, each prefixed, and is never held whole.
func TestLogsEscapedAndBounded(t *testing.T) {
	f := newFakeLogs(launcher)
	long := strings.Repeat("x", 2*maxLogLine+10)
	go func() {
		<-f.opened
		f.write(t, launcher, "\x1b[2J\x1b]0;owned\x07red \x1b[31mtext\x1b[0m\ttab\r\n")
		f.write(t, launcher, "\u009b31m C1 too\n")
		f.write(t, launcher, long+"\n")
		_ = f.writers[launcher].Close()
	}()
	var out, errOut bytes.Buffer
	if err := streamLogs(context.Background(), &out, &errOut, f, []logTarget{launcher}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	p := launcher.prefix()
	want := []string{p + `\x1b[2J\x1b]0;owned\ared \x1b[31mtext\x1b[0m` + "\ttab" + `\r`, p + `\u009b31m C1 too`,
		p + long[:maxLogLine], p + long[maxLogLine:2*maxLogLine], p + long[2*maxLogLine:]}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("output lines (-want +got):\n%s", diff)
	}
}
