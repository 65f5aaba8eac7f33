package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

func newLogsCommand(o *options) *cobra.Command {
	var (
		follow    bool
		tail      int64
		container string
	)
	cmd := &cobra.Command{
		Use:   "logs (NAME | KIND/NAME) [-f] [--tail N] [-c CONTAINER]",
		Short: "Print the logs of a job's launcher (master) and every worker, each line prefixed with its pod",
		Long: "Print the logs of every pod of a job, the launcher (master) first, then each worker (every\n" +
			"rank), each line prefixed [pod/NAME/CONTAINER] as kubectl logs --prefix does. With -f the\n" +
			"streams are followed all at once until every container ends, or Ctrl-C.",
		Example: "  kubectl troupe logs mpijob/pi\n  kubectl troupe logs pi -f\n  kubectl troupe logs pi --tail 20 -c mpi-worker",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, j, err := o.findJob(cmd, args[0])
			if err != nil {
				return err
			}
			// A job Kueue's MultiKueue dispatched runs in a worker cluster: its pods are there.
			d, err := s.dispatchOf(cmd.Context(), j)
			if err != nil {
				return err
			}
			if d != nil {
				if d.cluster == "" {
					return fmt.Errorf("%s runs in no cluster yet: %s", j.ref(), d.line())
				}
				ctx := o.workerContext(d.cluster)
				if ctx == "" {
					return fmt.Errorf("%s runs in %s: its pods are there. Add a context named %s for that cluster to your kubeconfig "+
						"(this command then reads them from it), or run: kubectl troupe logs %s -n %s --context <a context of %s>",
						j.ref(), d.line(), d.cluster, j.ref(), j.obj.GetNamespace(), d.cluster)
				}
				_, _ = fmt.Fprintf(o.streams.ErrOut, "%s runs in %s: reading its logs there (context %s)\n", j.ref(), d.line(), ctx)
				if s, j, err = o.workerOptions(ctx).findJob(cmd, j.ref()); err != nil {
					return fmt.Errorf("in worker cluster %s: %w", d.cluster, err)
				}
			}
			pods, err := s.pods(cmd.Context(), j)
			if err != nil {
				return err
			}
			targets, err := logTargets(pods, container)
			if err != nil {
				return fmt.Errorf("%s: %w", j.ref(), err)
			}
			opts := corev1.PodLogOptions{Follow: follow}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			src := podLogs{core: s.core, namespace: j.obj.GetNamespace(), opts: opts}
			return streamLogs(cmd.Context(), o.streams.Out, o.streams.ErrOut, src, targets, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "Follow every pod's log until its container ends.")
	cmd.Flags().Int64Var(&tail, "tail", -1, "Lines of recent log to show from each container; -1 shows all.")
	cmd.Flags().StringVarP(&container, "container", "c", "", "Only this container of each pod (default: every container).")
	return cmd
}

// logTarget is one container's log.
type logTarget struct {
	pod, container string
}

// prefix is what each line of the target's log starts with, as kubectl logs --prefix writes it.
func (t logTarget) prefix() string { return "[pod/" + t.pod + "/" + t.container + "] " }

// logTargets are the containers whose logs to show, in the pods' order: every container of each
// pod, or only the one named (an init container too), in the pods that have it.
func logTargets(pods []corev1.Pod, container string) ([]logTarget, error) {
	if len(pods) == 0 {
		return nil, errors.New("the job has no pods")
	}
	var out []logTarget
	for i := range pods {
		p := &pods[i]
		names := make([]string, 0, len(p.Spec.Containers))
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		if container != "" {
			for _, c := range p.Spec.InitContainers {
				names = append(names, c.Name)
			}
			if !slices.Contains(names, container) {
				continue
			}
			names = []string{container}
		}
		for _, n := range names {
			out = append(out, logTarget{pod: p.Name, container: n})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pod of the job has a container %q", container)
	}
	return out, nil
}

// logSource opens the log of one container.
type logSource interface {
	open(ctx context.Context, t logTarget) (io.ReadCloser, error)
}

// streamLogs writes the logs of targets to out, each line prefixed with its target: one after
// another, or, with parallel (following), all at once, whole lines interleaved as they come. A
// target whose log cannot be read is reported on errOut and the others still shown; the error
// returned then counts them. A cancelled ctx (Ctrl-C) ends every stream and is no error.
func streamLogs(ctx context.Context, out, errOut io.Writer, src logSource, targets []logTarget, parallel bool) error {
	var (
		mu     sync.Mutex // one line at a time on out and errOut
		failed int
	)
	copyOne := func(t logTarget) {
		err := copyPrefixed(ctx, &mu, out, src, t)
		if err == nil || ctx.Err() != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		failed++
		_, _ = fmt.Fprintf(errOut, "%serror: %v\n", t.prefix(), err)
	}
	if parallel {
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Go(func() { copyOne(t) })
		}
		wg.Wait()
	} else {
		for _, t := range targets {
			copyOne(t)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d logs could not be read", failed, len(targets))
	}
	return nil
}

// maxLogLine bounds what one stream holds in memory: a longer line is written in pieces of this
// size, each prefixed, rather than read whole (a pod that writes no newline would otherwise
// grow the plugin's memory without end).
const maxLogLine = 64 << 10

// copyPrefixed copies one target's log to out line by line, each line whole (up to maxLogLine)
// and prefixed, its control characters escaped (logEscaped).
func copyPrefixed(ctx context.Context, mu *sync.Mutex, out io.Writer, src logSource, t logTarget) error {
	rc, err := src.open(ctx, t)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	// A stream blocked in Read ends when ctx does: closing it wakes the reader.
	stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
	defer stop()
	r := bufio.NewReaderSize(rc, maxLogLine)
	prefix := t.prefix()
	for {
		piece, err := r.ReadSlice('\n')
		if len(piece) > 0 {
			line := logEscaped(strings.TrimSuffix(string(piece), "\n")) + "\n"
			mu.Lock()
			_, werr := io.WriteString(out, prefix+line)
			mu.Unlock()
			if werr != nil {
				return werr
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the rest of a long line follows, as a line of its own
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// logEscaped writes a pod's control characters (terminal escape sequences among them: a pod
// could move the cursor, retitle or clear the user's terminal, or hide lines) as Go escapes, tab
// alone kept.
func logEscaped(line string) string {
	if !strings.ContainsFunc(line, escapedInLogs) {
		return line
	}
	var b strings.Builder
	for _, r := range line {
		if escapedInLogs(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func escapedInLogs(r rune) bool { return r != '\t' && unicode.IsControl(r) }

// podLogs reads containers' logs through the API server (pods/log).
type podLogs struct {
	core      kubernetes.Interface
	namespace string
	opts      corev1.PodLogOptions
}

// startPoll is how often a followed container that has not started yet is looked at again.
const startPoll = time.Second

func (p podLogs) open(ctx context.Context, t logTarget) (io.ReadCloser, error) {
	if p.opts.Follow {
		// Following a container that has not started is refused by the API server: wait for
		// it, as the user waits for the job.
		if err := p.waitStarted(ctx, t); err != nil {
			return nil, err
		}
	}
	opts := p.opts
	opts.Container = t.container
	return p.core.CoreV1().Pods(p.namespace).GetLogs(t.pod, &opts).Stream(ctx)
}

// waitStarted waits until the container runs or ran.
func (p podLogs) waitStarted(ctx context.Context, t logTarget) error {
	return wait.PollUntilContextCancel(ctx, startPoll, true, func(ctx context.Context) (bool, error) {
		pod, err := p.core.CoreV1().Pods(p.namespace).Get(ctx, t.pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("pod %s was deleted before its container %s started", t.pod, t.container)
		}
		if err != nil {
			return false, err
		}
		return containerStarted(pod, t.container), nil
	})
}

// containerStarted reports whether the container has a log to read: it runs or ran, or its
// pod has ended.
func containerStarted(pod *corev1.Pod, container string) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name == container {
				return cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil
			}
		}
	}
	return false
}
