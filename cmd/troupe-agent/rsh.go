package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// rshOptionsWithValue are the rsh/ssh options launchers may pass that take a value; the agent
// accepts and ignores them (the pod's container and the API server decide the rest).
var rshOptionsWithValue = map[string]bool{"-l": true, "-p": true, "-o": true, "-i": true, "-F": true, "-E": true}

// parseRsh splits "[options] host command..." as rsh and ssh read it.
func parseRsh(args []string) (host string, command string, err error) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if rshOptionsWithValue[args[i]] {
			i++
		}
		i++
	}
	if i >= len(args) {
		return "", "", errors.New("no host given")
	}
	host = args[i]
	if i+1 >= len(args) {
		return "", "", fmt.Errorf("no command given for host %s: interactive logins are not supported", host)
	}
	return host, strings.Join(args[i+1:], " "), nil
}

// rsh runs a command in the host's pod, as "rsh host command" would on the host: through a
// shell, with the caller's stdin, stdout and stderr, exiting with the command's exit code.
func rsh(args []string) int {
	host, command, err := parseRsh(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", rshName, err)
		return 255
	}
	launcher, _ := os.Hostname()
	code, err := execInPod(context.Background(), host, []string{"/bin/sh", "-c", markedCommand(launcher, command)}, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s: %v\n", rshName, host, err)
	}
	return code
}

// execInPod runs argv in the main container of the host's pod and returns its exit code; an
// error that is not the command's own exit status gives 255, as ssh does.
func execInPod(ctx context.Context, host string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	namespace, pod, err := podOf(host)
	if err != nil {
		return 255, err
	}
	cfg, err := restConfig()
	if err != nil {
		return 255, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 255, err
	}
	if err := ofOwnJob(ctx, cs, namespace, pod); err != nil {
		return 255, err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: os.Getenv(mpi.EnvExecContainer),
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	// WebSockets first, as kubectl does; SPDY for API servers that do not offer them.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return 255, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return 255, err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return 255, err
	}
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var exitErr utilexec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		return exitErr.Code, nil
	default:
		return 255, err
	}
}

// podReady reports why the host's pod is not Ready yet, or nil. A worker's readinessProbe is
// how it says it is prepared (code installed, data fetched), so the launcher waits for it; a
// pod without probes is Ready once its containers run.
func podReady(ctx context.Context, host string) error {
	namespace, name, err := podOf(host)
	if err != nil {
		return err
	}
	cfg, err := restConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is terminating", name)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("pod %s is not Ready (phase %s)", name, pod.Status.Phase)
}

// ofOwnJob refuses a pod that is not of the launcher's own job ($TROUPE_JOB_UID against the
// pod's troupe.dev/job-uid label). The job's Role already allows exec into its worker pods only,
// by name; this holds even if a token of wider rights reached the launcher, so that a hostfile
// naming another job's pod (edited, or of a job of the same name recreated) never runs a
// process there. Without $TROUPE_JOB_UID (the agent run by hand) nothing is checked.
func ofOwnJob(ctx context.Context, cs kubernetes.Interface, namespace, name string) error {
	uid := os.Getenv(mpi.EnvJobUID)
	if uid == "" {
		return nil
	}
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := pod.Labels[troupev1.LabelJobUID]; got != uid {
		return fmt.Errorf("pod %s is not of this job (its %s is %q, the launcher's job is %s): refusing to exec into it",
			name, troupev1.LabelJobUID, got, uid)
	}
	return nil
}
