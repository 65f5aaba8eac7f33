// Package progress serves the endpoint a job's training reports its progress to
// (docs/progress.md): an HTTPS handler on the operator's webhook server that takes a report from
// a pod of the job the URL names, authenticated by the pod's own ServiceAccount token for the
// audience progress.troupe.dev (a TokenReview, cached), bounded in size and rate, keeps each
// job's latest report in memory and wakes the job's pass, which writes it into
// status.progress. The endpoint never writes to the API server itself.
package progress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// Path is where the endpoint is served; a job's reports go to
// Path + "namespaces/<namespace>/<kind in lower case>/<name>".
const Path = "/progress/v1/"

// Limits of the endpoint: one job's reports are taken at ReportsPerSecond, with bursts of
// ReportBurst; the rest are answered 429 at once, costing a map lookup and nothing else.
// MaxJobs bounds the jobs whose latest report is kept (the least recently reported goes).
const (
	ReportsPerSecond = 1
	ReportBurst      = 5
	MaxJobs          = 10000
	// wakeBuffer is how many wake-ups may wait for the reconcilers of a kind; one more is
	// dropped (the job's next report or event folds the report in).
	wakeBuffer = 1024
)

// Kind is one kind of job the endpoint takes reports of.
type Kind struct {
	// Name is the kind's name (MPIJob).
	Name string
	// NewObject returns an empty job of the kind.
	NewObject func() engine.Object
}

// Server is the progress endpoint and the store of the latest reports. It implements
// engine.ProgressReports.
type Server struct {
	cache    client.Reader
	reviewer *Reviewer
	kinds    map[string]Kind // by lower-case name
	wakeups  map[string]chan event.GenericEvent
	// elected is closed once this replica leads: only the leader's reconcilers fold reports,
	// so another replica answers 503 and the client tries again (the Service picks a replica).
	elected <-chan struct{}
	clock   clock.PassiveClock

	// pods and jobRates are the reporting pods' and jobs' token buckets, by UID.
	pods, jobRates buckets

	mu   sync.Mutex
	jobs map[types.UID]*jobReports
}

// jobReports is what the endpoint keeps of one job.
type jobReports struct {
	latest engine.ProgressReport
	anchor struct {
		current int64
		at      time.Time
	} // where the rate is measured from
	touched time.Time
}

// NewServer returns the endpoint for kinds, reading jobs and pods from cache (the manager's,
// which holds the jobs and their pods) and reviewing tokens with reviewer.
func NewServer(cache client.Reader, reviewer *Reviewer, elected <-chan struct{}, kinds ...Kind) *Server {
	s := &Server{cache: cache, reviewer: reviewer, elected: elected, clock: clock.RealClock{},
		kinds: map[string]Kind{}, wakeups: map[string]chan event.GenericEvent{}, jobs: map[types.UID]*jobReports{}}
	for _, k := range kinds {
		s.kinds[strings.ToLower(k.Name)] = k
		s.wakeups[k.Name] = make(chan event.GenericEvent, wakeBuffer)
	}
	return s
}

// Endpoint is the engine's view of the server: reports, wake-ups, and what the pods are given
// (the URL under base, "https://<service>.<namespace>.svc", and the CA ca returns).
func (s *Server) Endpoint(base string, ca func() []byte) engine.ProgressEndpoint {
	base = strings.TrimSuffix(base, "/")
	return engine.ProgressEndpoint{
		Reports: s,
		URL:     func(ns, kind, name string) string { return base + JobPath(ns, kind, name) },
		CA:      ca,
		Wakeups: func(kind string, h handler.EventHandler) source.Source {
			return source.Channel(s.wakeups[kind], h)
		},
	}
}

// JobPath is the path of a job's reports.
func JobPath(namespace, kind, name string) string {
	return Path + "namespaces/" + namespace + "/" + strings.ToLower(kind) + "/" + name
}

// Latest is the latest report of the job with this UID.
func (s *Server) Latest(uid types.UID) (engine.ProgressReport, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[uid]; ok {
		return j.latest, true
	}
	return engine.ProgressReport{}, false
}

// Report is what a training sends: JSON, at most MaxProgressReportBytes.
type Report struct {
	Current int64              `json:"current"`
	Total   int64              `json:"total,omitempty"`
	Unit    string             `json:"unit,omitempty"`
	Message string             `json:"message,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

var metricName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// validate says what is wrong with the report, nil if nothing.
func (r *Report) validate() error {
	var errs []error
	if r.Current < 0 || r.Total < 0 {
		errs = append(errs, errors.New("current and total must not be negative"))
	}
	if len(r.Unit) > troupev1.MaxProgressUnit || !metricName.MatchString(r.Unit) && r.Unit != "" {
		errs = append(errs, fmt.Errorf("unit: at most %d lower-case letters, digits and underscores", troupev1.MaxProgressUnit))
	}
	if len(r.Message) > troupev1.MaxProgressMessage || !utf8.ValidString(r.Message) {
		errs = append(errs, fmt.Errorf("message: at most %d bytes of UTF-8", troupev1.MaxProgressMessage))
	}
	if len(r.Metrics) > troupev1.MaxProgressMetrics {
		errs = append(errs, fmt.Errorf("metrics: at most %d, got %d", troupev1.MaxProgressMetrics, len(r.Metrics)))
	}
	for name, v := range r.Metrics {
		if len(name) > troupev1.MaxProgressMetricName || !metricName.MatchString(name) {
			errs = append(errs, fmt.Errorf("metric %.40q: a name of at most %d lower-case letters, digits and underscores, starting with a letter",
				name, troupev1.MaxProgressMetricName))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("metric %.40q: not a finite number", name))
		}
	}
	return errors.Join(errs...)
}

// ServeHTTP takes one report: POST Path/namespaces/<ns>/<kind>/<name> with the pod's token as
// its bearer token and a Report as its body. 202 when taken; 400 a report that is not one;
// 401 no token, or one the API server does not take for the audience; 403 a pod's that is not
// of the job; 404 no such job; 409 a pod of an earlier attempt; 413 too large; 429 too many
// (Retry-After); 503 not the leading replica (Retry-After).
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status, msg := s.serve(req)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"code": status, "message": msg})
	_, _ = w.Write(append(body, '\n'))
}

func (s *Server) serve(req *http.Request) (int, string) {
	if req.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "POST a report"
	}
	select {
	case <-s.elected:
	default:
		return http.StatusServiceUnavailable, "this replica of the operator does not lead; try again"
	}
	ns, kindName, name, ok := parsePath(req.URL.Path)
	if !ok {
		return http.StatusNotFound, "the path is " + Path + "namespaces/<namespace>/<kind>/<name>"
	}
	kind, ok := s.kinds[kindName]
	if !ok {
		return http.StatusNotFound, fmt.Sprintf("no kind %q", kindName)
	}
	if req.ContentLength > troupev1.MaxProgressReportBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", troupev1.MaxProgressReportBytes)
	}
	token := metrics.BearerToken(req)
	if !metrics.IsJWT(token) {
		return http.StatusUnauthorized, "give the pod's token (the file $" + troupev1.EnvProgressTokenFile + ") as a bearer token"
	}
	who, status, err := s.reviewer.Review(req.Context(), token)
	if err != nil {
		return status, err.Error()
	}
	// A pod that reports too often is answered before anything else is read: a flood from one
	// pod costs its token's hash and a map lookup a report.
	if !s.pods.take(string(who.UID), s.clock.Now()) {
		return http.StatusTooManyRequests, tooMany
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, troupev1.MaxProgressReportBytes+1))
	if err != nil {
		return http.StatusBadRequest, "reading the report: " + err.Error()
	}
	if len(body) > troupev1.MaxProgressReportBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", troupev1.MaxProgressReportBytes)
	}
	var rep Report
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return http.StatusBadRequest, "not a report: " + err.Error()
	}
	if err := rep.validate(); err != nil {
		return http.StatusBadRequest, err.Error()
	}

	job := kind.NewObject()
	if err := s.cache.Get(req.Context(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return http.StatusNotFound, fmt.Sprintf("no %s %s/%s", kind.Name, ns, name)
		}
		return http.StatusServiceUnavailable, "reading the job: " + err.Error()
	}
	if status, err := s.podOfJob(req.Context(), who, job); err != nil {
		return status, err.Error()
	}
	if !s.take(job.GetUID(), rep) {
		return http.StatusTooManyRequests, tooMany
	}
	s.wake(kind.Name, job)
	return http.StatusAccepted, "taken"
}

var tooMany = fmt.Sprintf("at most %d reports a second per job and per pod (bursts of %d)", ReportsPerSecond, ReportBurst)

// buckets are token buckets (ReportsPerSecond, ReportBurst) by key, at most MaxJobs of them (the
// one used least recently goes).
type buckets struct {
	mu sync.Mutex
	by map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// take takes a token of key's bucket at now, if it has one.
func (b *buckets) take(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[string]*bucket{}
	}
	k, ok := b.by[key]
	if !ok {
		if len(b.by) >= MaxJobs {
			var oldest string
			for key, v := range b.by {
				if oldest == "" || v.at.Before(b.by[oldest].at) {
					oldest = key
				}
			}
			delete(b.by, oldest)
		}
		k = &bucket{tokens: ReportBurst, at: now}
		b.by[key] = k
	}
	k.tokens = math.Min(ReportBurst, k.tokens+now.Sub(k.at).Seconds()*ReportsPerSecond)
	k.at = now
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

// podOfJob says whether the pod the token is of belongs to job, and to its current attempt.
func (s *Server) podOfJob(ctx context.Context, who Pod, job engine.Object) (int, error) {
	if who.Namespace != job.GetNamespace() {
		return http.StatusForbidden, fmt.Errorf("the token is of a pod of namespace %s, not of the job's", who.Namespace)
	}
	var pod corev1.Pod
	if err := s.cache.Get(ctx, client.ObjectKey{Namespace: who.Namespace, Name: who.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return http.StatusForbidden, fmt.Errorf("the token is of pod %s, which is not a pod of a troupe job", who.Name)
		}
		return http.StatusServiceUnavailable, fmt.Errorf("reading the pod: %w", err)
	}
	if pod.UID != who.UID || pod.Labels[troupev1.LabelJobUID] != string(job.GetUID()) {
		return http.StatusForbidden, fmt.Errorf("the token is of pod %s, which is not a pod of %s", who.Name, job.GetName())
	}
	if a, ok := pod.Labels[troupev1.LabelRestartAttempt]; ok && a != strconv.Itoa(int(job.JobStatus().Restarts)) {
		return http.StatusConflict, fmt.Errorf("pod %s is of attempt %s; the job runs attempt %d", who.Name, a, job.JobStatus().Restarts)
	}
	return 0, nil
}

// take keeps rep as the job's latest report, unless the job reported too often (its token
// bucket is empty).
func (s *Server) take(uid types.UID, rep Report) bool {
	now := s.clock.Now()
	if !s.jobRates.take(string(uid), now) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[uid]
	if !ok {
		s.makeRoom()
		j = &jobReports{}
		s.jobs[uid] = j
	}
	j.touched = now
	if j.anchor.at.IsZero() || rep.Current < j.latest.Current {
		// The first report, or the training started again (a restart): measure anew.
		j.anchor.current, j.anchor.at = rep.Current, now
	}
	rate := 0.0
	if d := now.Sub(j.anchor.at).Seconds(); d >= 1 && rep.Current > j.anchor.current {
		rate = float64(rep.Current-j.anchor.current) / d
	}
	j.latest = engine.ProgressReport{Current: rep.Current, Total: rep.Total, Unit: rep.Unit, Message: rep.Message,
		Metrics: metricsOf(rep.Metrics), Rate: rate, Received: now}
	return true
}

// makeRoom forgets the job reported least recently when MaxJobs are kept (with s.mu held).
func (s *Server) makeRoom() {
	if len(s.jobs) < MaxJobs {
		return
	}
	var oldest types.UID
	var at time.Time
	for uid, j := range s.jobs {
		if oldest == "" || j.touched.Before(at) {
			oldest, at = uid, j.touched
		}
	}
	delete(s.jobs, oldest)
}

// wake queues a pass of the job; a full queue drops it (the reconcilers are behind: the job's
// next report or event folds this one in).
func (s *Server) wake(kind string, job engine.Object) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: job.GetNamespace(), Name: job.GetName()}}
	select {
	case s.wakeups[kind] <- event.GenericEvent{Object: obj}:
	default:
		ctrl.Log.WithName("progress").V(2).Info("wake-up queue full", "kind", kind, "job", client.ObjectKeyFromObject(job))
	}
}

// metricsOf is a report's metrics as the status lists them: by name, six significant digits.
func metricsOf(m map[string]float64) []troupev1.ProgressMetric {
	out := make([]troupev1.ProgressMetric, 0, len(m))
	for name, v := range m {
		out = append(out, troupev1.ProgressMetric{Name: name, Value: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	sortMetrics(out)
	return out
}

// parsePath splits Path/namespaces/<ns>/<kind>/<name>.
func parsePath(p string) (ns, kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, Path+"namespaces/")
	if !ok {
		return "", "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

func sortMetrics(m []troupev1.ProgressMetric) {
	slices.SortFunc(m, func(a, b troupev1.ProgressMetric) int { return strings.Compare(a.Name, b.Name) })
}
