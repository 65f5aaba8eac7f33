package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Why a job's pods do not run, from what the operator already caches of them (trimPod keeps
// the waiting reasons, the last terminations and the PodScheduled condition of a pod the
// scheduler could not place): the kubelet's and the scheduler's words, gathered per worker set
// and for the master, for the WorkersReady and Running conditions, status.reason, the failure
// of a launcher whose wait timed out, and the crash-loop limit (runPolicy.workerRestartLimit).
// docs/troubleshooting.md lists the reasons.

// maxCauseText bounds what a cause quotes of a kubelet's or scheduler's message, and trimPod
// keeps no more of one: the start of a kubelet's or scheduler's message (which names the image,
// or the nodes' verdict), the end of a container's termination message (a log's end says why it
// exited).
const maxCauseText = 512

// lastBytes is the end of s, at most maxCauseText bytes, cut on a rune boundary ("..." marks
// a cut).
func lastBytes(s string) string {
	if len(s) <= maxCauseText {
		return s
	}
	start := len(s) - maxCauseText
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return "..." + s[start:]
}

func joinRefs(refs []childRef) string {
	names := make([]string, 0, len(refs))
	for _, c := range refs {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// maxNamesInMessage bounds the host names a condition message lists, so a large job's status
// stays readable and small.
const maxNamesInMessage = 10

func abbreviate(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

func newCondition(t string, ok bool, reason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg}
}

// quoted is ": msg" with msg cut to maxExitMessage bytes from its start (troupe-agent wait
// puts its summary first), or nothing when msg is empty.
func quoted(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return ""
	}
	if len(msg) > maxExitMessage {
		msg = msg[:maxExitMessage] + "..."
	}
	return ": " + msg
}

// NoteLimit is the longest event note, in bytes, that the API server accepts: it refuses a
// longer one, and the event is lost (a Failed event quoting a launcher's traceback was).
const NoteLimit = 1024

// noteCut ends a note that was cut to fit.
const noteCut = " [...]"

// fitNote returns note cut to NoteLimit bytes on a UTF-8 boundary, marked as cut, or note when
// it fits.
func fitNote(note string) string { return fitBytes(note, NoteLimit) }

// fitConditionMessages cuts every condition's message to troupev1.ConditionMessageLimit bytes:
// the one place for the job status writes, whatever a message quotes (a termination message,
// an error, Kueue's words).
func fitConditionMessages(conds []metav1.Condition) {
	for i := range conds {
		conds[i].Message = FitConditionMessage(conds[i].Message)
	}
}

// FitConditionMessage is msg cut to troupev1.ConditionMessageLimit bytes (fitConditionMessages).
func FitConditionMessage(msg string) string { return fitBytes(msg, troupev1.ConditionMessageLimit) }

// fitBytes is s cut to limit bytes on a UTF-8 boundary, marked as cut, or s when it fits.
func fitBytes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	end := limit - len(noteCut)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + noteCut
}

// LimitNotes is a recorder whose every note fits the API server's limit: the one place where
// troupe's event notes are cut, whatever the recorder's caller writes into them.
func LimitNotes(r events.EventRecorder) events.EventRecorder { return noteLimiter{next: r} }

type noteLimiter struct{ next events.EventRecorder }

func (l noteLimiter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	l.next.Eventf(regarding, related, eventtype, reason, action, "%s", fitNote(fmt.Sprintf(note, args...)))
}

// maxExitMessage bounds the launcher's message quoted in the Failed condition: the end of the
// message (mpirun's summary is last) is kept.
const maxExitMessage = 1024

func isTrue(st *troupev1.JobStatus, t string) bool {
	return meta.IsStatusConditionTrue(st.Conditions, t)
}
