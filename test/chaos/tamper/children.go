package tamper

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// kindOf returns the registered kind named name.
func kindOf(name string) (kinds.Kind, error) {
	for _, k := range kinds.All() {
		if k.Name == name {
			return k, nil
		}
	}
	return kinds.Kind{}, fmt.Errorf("unknown kind %q", name)
}

// getJob reads the target from the API server.
func getJob(ctx context.Context, c client.Client, t Target) (engine.Object, error) {
	k, err := kindOf(t.Kind)
	if err != nil {
		return nil, err
	}
	job := k.NewObject()
	if err := c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: %w", t, errNoJob)
		}
		return nil, fmt.Errorf("get %s: %w", t, err)
	}
	return job, nil
}

// desiredChildren are the job's children as the engine builds them, through the kind's own
// adapter: the names and types come from the code that creates them, not from a second list.
// Content that depends on the operator's flags (the agent image) may differ from the
// operator's; Do compares a child with itself before the tampering, never with these.
func desiredChildren(job engine.Object, t Target) ([]client.Object, error) {
	k, err := kindOf(t.Kind)
	if err != nil {
		return nil, err
	}
	a := k.Adapter(controllers.Options{AvailableGangs: map[troupev1.GangProvider]bool{
		troupev1.GangVolcano: true, troupev1.GangCoscheduling: true, troupev1.GangNone: true,
	}})
	s := &engine.Spec{
		Name: job.GetName(), Namespace: job.GetNamespace(), NameLabel: a.NameLabel(),
		Owner: *metav1.NewControllerRef(job, troupev1.GroupVersion.WithKind(t.Kind)),
	}
	if err := a.Describe(job, s); err != nil {
		return nil, fmt.Errorf("%s: describe: %w", t, err)
	}
	return engine.Children(s, false), nil
}

// readable keeps the children whose types the client's scheme knows (a harness whose scheme
// lacks the PodGroup types cannot read a gang's PodGroup; everything else is still checked).
func readable(c client.Client, kids []client.Object) []client.Object {
	var out []client.Object
	for _, o := range kids {
		if _, _, err := c.Scheme().ObjectKinds(o); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// pickChild returns the desired child an action acts on, or nil when the job has none.
func pickChild(kids []client.Object, action string, t Target) client.Object {
	var sets []client.Object
	for _, o := range kids {
		if _, ok := o.(*appsv1.StatefulSet); ok {
			sets = append(sets, o)
		}
	}
	slices.SortFunc(sets, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	first := func(match func(client.Object) bool) client.Object {
		for _, o := range kids {
			if match(o) {
				return o
			}
		}
		return nil
	}
	switch action {
	case ActionDeleteMaster:
		// Not a worker Job of a set that runs to completion (they come first).
		return first(func(o client.Object) bool {
			_, ok := o.(*batchv1.Job)
			return ok && o.GetLabels()[troupev1.LabelWorkerSet] == ""
		})
	case ActionDeleteWorkers, ActionScaleWorkers, ActionRemoveOwnerRef:
		if len(sets) > 0 {
			return sets[0]
		}
	case ActionDeleteService:
		return first(func(o client.Object) bool { _, ok := o.(*corev1.Service); return ok && o.GetName() == t.Name })
	case ActionDeleteHostfile, ActionEditHostfile:
		return first(func(o client.Object) bool {
			cm, ok := o.(*corev1.ConfigMap)
			if !ok {
				return false
			}
			_, has := cm.Data[mpi.HostfileKey]
			return has
		})
	case ActionDeleteExecRole:
		return first(func(o client.Object) bool { _, ok := o.(*rbacv1.Role); return ok })
	case ActionDeleteSSHSecret:
		name := mpi.SSHSecretName(&engine.Spec{Name: t.Name})
		return first(func(o client.Object) bool { _, ok := o.(*corev1.Secret); return ok && o.GetName() == name })
	}
	return nil
}

// readChild reads the object named like want, of its type, from the API server.
func readChild(ctx context.Context, c client.Client, want client.Object) (client.Object, error) {
	cur := reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(want), cur)
	return cur, err
}

// childName is "<Type> <name>", e.g. "StatefulSet train-worker".
func childName(o client.Object) string {
	return reflect.TypeOf(o).Elem().Name() + " " + o.GetName()
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// finished reports whether the job has ended, and its phase.
func finished(ctx context.Context, c client.Client, t Target) (bool, troupev1.JobPhase) {
	job, err := getJob(ctx, c, t)
	if err != nil {
		return false, ""
	}
	p := job.JobStatus().Phase
	return p == troupev1.JobSucceeded || p == troupev1.JobFailed, p
}

// Children returns the UID of each child of job t that exists and is controlled by it, by
// "<Type> <name>": taken before and after an outage, two snapshots show whether anything the
// operator created was lost or replaced meanwhile.
func Children(ctx context.Context, c client.Client, t Target) (map[string]types.UID, error) {
	job, err := getJob(ctx, c, t)
	if err != nil {
		return nil, err
	}
	kids, err := desiredChildren(job, t)
	if err != nil {
		return nil, err
	}
	out := map[string]types.UID{}
	for _, want := range readable(c, kids) {
		cur, err := readChild(ctx, c, want)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", t, childName(want), err)
		}
		if metav1.IsControlledBy(cur, job) {
			out[childName(cur)] = cur.GetUID()
		}
	}
	return out, nil
}

// AtRest reports whether job t runs with everything in place: phase Running, its workers
// ready, and every child the engine wants present and controlled by the job. Tamper with a job
// at rest, so that what Do measures is the repair of the tampering alone.
func AtRest(ctx context.Context, c client.Client, t Target) (bool, error) {
	job, err := getJob(ctx, c, t)
	if err != nil {
		return false, err
	}
	st := job.JobStatus()
	if st.Phase != troupev1.JobRunning || !meta.IsStatusConditionTrue(st.Conditions, troupev1.ConditionWorkersReady) {
		return false, nil
	}
	kids, err := desiredChildren(job, t)
	if err != nil {
		return false, err
	}
	have, err := Children(ctx, c, t)
	if err != nil {
		return false, err
	}
	return len(have) == len(readable(c, kids)), nil
}
