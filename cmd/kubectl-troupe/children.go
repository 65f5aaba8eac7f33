package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// children are the objects the operator made for a job, found by the label every child and
// pod carries: troupe.dev/job-uid=<the job's UID>.
type children struct {
	jobs       []batchv1.Job
	sets       []appsv1.StatefulSet
	services   []corev1.Service
	configMaps []corev1.ConfigMap
	// secrets are read as metadata only: the plugin never reads a Secret's data.
	secrets []metav1.PartialObjectMetadata
	pods    []corev1.Pod
	// notShown are the kinds of object the user may not list for the job (its children and
	// pods; describe adds its events), each with the API server's refusal.
	notShown []notShown
}

// notShown is a kind of object ("Secrets", "Pods", "Events") the user may not read, and why.
type notShown struct {
	what, why string
}

// forbidden turns a refusal of the API server into a notShown, and passes any other error on.
func forbidden(what string, err error) (notShown, error) {
	if !apierrors.IsForbidden(err) {
		return notShown{}, err
	}
	why := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		why = status.Status().Message
	}
	// "secrets is forbidden: User "u" cannot list ...": the resource is already named by what.
	if _, reason, ok := strings.Cut(why, " is forbidden: "); ok {
		why = reason
	}
	return notShown{what: what, why: "forbidden: " + why}, nil
}

// notShownOf is the refusal of what among ns, if what was refused.
func notShownOf(ns []notShown, what string) (notShown, bool) {
	i := slices.IndexFunc(ns, func(n notShown) bool { return n.what == what })
	if i < 0 {
		return notShown{}, false
	}
	return ns[i], true
}

// listOwned lists into l the objects of l's type that belong to the job: its namespace's,
// labelled with its UID.
func (s *session) listOwned(ctx context.Context, j job, l client.ObjectList) error {
	err := s.client.List(ctx, l, client.InNamespace(j.obj.GetNamespace()),
		client.MatchingLabels{troupev1.LabelJobUID: string(j.obj.GetUID())})
	if err != nil {
		return fmt.Errorf("list the children of %s: %w", j.ref(), err)
	}
	return nil
}

func (s *session) children(ctx context.Context, j job) (children, error) {
	var c children
	var (
		jobs     batchv1.JobList
		sets     appsv1.StatefulSetList
		services corev1.ServiceList
		cms      corev1.ConfigMapList
		pods     corev1.PodList
	)
	secrets := metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"Jobs", &jobs}, {"StatefulSets", &sets}, {"Services", &services}, {"ConfigMaps", &cms}, {"Secrets", &secrets}, {"Pods", &pods}} {
		if err := s.listOwned(ctx, j, l.list); err != nil {
			refused, err := forbidden(l.what, err)
			if err != nil {
				return c, err
			}
			c.notShown = append(c.notShown, refused)
		}
	}
	c.jobs, c.sets, c.services, c.configMaps, c.secrets, c.pods = jobs.Items, sets.Items, services.Items, cms.Items, secrets.Items, pods.Items
	slices.SortFunc(c.jobs, func(a, b batchv1.Job) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(c.sets, func(a, b appsv1.StatefulSet) int { return cmp.Compare(a.Name, b.Name) })
	sortPods(c.pods)
	return c, nil
}

// pods are the job's pods, the master first.
func (s *session) pods(ctx context.Context, j job) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := s.listOwned(ctx, j, &pods); err != nil {
		return nil, err
	}
	sortPods(pods.Items)
	return pods.Items, nil
}

// configMaps are the job's ConfigMaps.
func (s *session) configMaps(ctx context.Context, j job) ([]corev1.ConfigMap, error) {
	var cms corev1.ConfigMapList
	if err := s.listOwned(ctx, j, &cms); err != nil {
		return nil, err
	}
	return cms.Items, nil
}

// events are the job's own events (not its children's), oldest first, as kubectl describe
// finds an object's: by the UID of the object they are about.
func (s *session) events(ctx context.Context, j job) ([]corev1.Event, error) {
	sel := fields.OneTermEqualSelector("involvedObject.uid", string(j.obj.GetUID())).String()
	l, err := s.core.CoreV1().Events(j.obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the events of %s: %w", j.ref(), err)
	}
	sortEvents(l.Items)
	return l.Items, nil
}

// sortPods orders a job's pods the way a user reads them: the master first, then the workers
// by worker set and ordinal (worker-2 before worker-10), then anything else by name.
func sortPods(pods []corev1.Pod) {
	rank := func(p *corev1.Pod) int {
		switch p.Labels[troupev1.LabelRole] {
		case troupev1.RoleMaster:
			return 0
		case troupev1.RoleWorker:
			return 1
		}
		return 2
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(rank(&a), rank(&b)),
			cmp.Compare(a.Labels[troupev1.LabelWorkerSet], b.Labels[troupev1.LabelWorkerSet]),
			compareNames(a.Name, b.Name))
	})
}

// compareNames compares names that end in "-<number>" by the number when their stems agree.
func compareNames(a, b string) int {
	stemA, numA, okA := ordinal(a)
	stemB, numB, okB := ordinal(b)
	if okA && okB && stemA == stemB {
		return cmp.Compare(numA, numB)
	}
	return cmp.Compare(a, b)
}

func ordinal(name string) (string, int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return name[:i], n, err == nil
}

// eventTimes are when an event was last and first seen and how often, whichever API wrote it:
// events.k8s.io/v1 writers (the operator's) set eventTime and series, core/v1 writers the
// timestamps and count.
func eventTimes(e *corev1.Event) (last, first time.Time, count int32) {
	first = e.FirstTimestamp.Time
	if first.IsZero() {
		first = e.EventTime.Time
	}
	if first.IsZero() {
		first = e.CreationTimestamp.Time
	}
	last, count = e.LastTimestamp.Time, e.Count
	if e.Series != nil {
		last, count = e.Series.LastObservedTime.Time, e.Series.Count
	}
	if last.IsZero() {
		last = first
	}
	return last, first, max(count, 1)
}

// sortEvents orders events by when they were last seen, oldest first.
func sortEvents(events []corev1.Event) {
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		la, _, _ := eventTimes(&a)
		lb, _, _ := eventTimes(&b)
		return la.Compare(lb)
	})
}
