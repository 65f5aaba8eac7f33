package kinds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// BenchmarkCachedJob is what the operator's cache keeps of one job: every child of each example
// with its workers running, and its pods running (one per worker and the master's), each decoded
// from JSON as a watch delivers it and passed through the cache's transform for its type
// (engine.CacheOptions), in bytes of heap retained per job: "children-B/job" and "pods-B/job".
// Each job of a run has a name and UID of its own, as jobs have. It isolates the memory a change
// of the cache's trims saves at any scale (docs/performance.md, "Memory"): the operator holds
// this per job, besides its informers' indexes and the jobs themselves.
func BenchmarkCachedJob(b *testing.B) {
	opts, err := engine.CacheOptions(nil)
	if err != nil {
		b.Fatal(err)
	}
	transformOf := func(obj client.Object) toolscache.TransformFunc {
		for o, by := range opts.ByObject {
			if reflect.TypeOf(o) == reflect.TypeOf(obj) && by.Transform != nil {
				return by.Transform
			}
		}
		return opts.DefaultTransform
	}
	for _, ex := range examples(b) {
		b.Run(filepath.Base(ex.file), func(b *testing.B) {
			job := ex.admitted(b, "bench")
			s := describeSpec(ex.kind, job)
			if err := ex.kind.Adapter(fuzzAdapterOptions).Describe(job, s); err != nil {
				b.Fatal(err)
			}
			var children, pods []encodedObject
			for _, c := range engine.Children(s, false) {
				c.SetNamespace(s.Namespace)
				children = append(children, encodeForWatch(b, heldAs(c)))
				for _, p := range podsOf(c) {
					pods = append(pods, encodeForWatch(b, p))
				}
			}
			var kept []any
			// decodeAll decodes objs as the objects of job i (its name and UID its own) and
			// keeps what the cache would.
			decodeAll := func(i int, objs []encodedObject) {
				uid := fmt.Appendf(nil, `"%08d-0000-4000-8000-000000000000"`, i)
				name := fmt.Appendf(nil, "%s-%d", s.Name, i)
				for _, o := range objs {
					data := bytes.ReplaceAll(bytes.ReplaceAll(o.data, []byte(`"fuzz"`), uid), []byte(s.Name), name)
					obj := reflect.New(reflect.TypeOf(o.typ).Elem()).Interface().(client.Object)
					if err := json.Unmarshal(data, obj); err != nil {
						b.Fatal(err)
					}
					cached, err := transformOf(obj)(obj)
					if err != nil {
						b.Fatal(err)
					}
					kept = append(kept, cached)
				}
			}
			// The parts are measured one after the other, the first part's objects kept.
			for _, part := range []struct {
				unit string
				objs []encodedObject
			}{{"children-B/job", children}, {"pods-B/job", pods}} {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.StartTimer()
				for i := range b.N {
					decodeAll(i, part.objs)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), part.unit)
			}
			runtime.KeepAlive(kept)
		})
	}
}

// encodedObject is an object as the API server sends it, and an empty object of its type.
type encodedObject struct {
	data []byte
	typ  client.Object
}

func encodeForWatch(b *testing.B, obj client.Object) encodedObject {
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return encodedObject{data: data, typ: obj}
}

// heldAs is obj as the operator watches it: a Secret as its metadata (engine.WatchedChildren).
func heldAs(obj client.Object) client.Object {
	if s, ok := obj.(*corev1.Secret); ok {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: s.ObjectMeta}
	}
	return obj
}

// podsOf are the running pods of a StatefulSet or Job, as the kubelet reports them.
func podsOf(obj client.Object) []*corev1.Pod {
	var tmpl *corev1.PodTemplateSpec
	var n int32
	var kind, apiVersion string
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		tmpl, n, kind, apiVersion = &o.Spec.Template, ptr.Deref(o.Spec.Replicas, 1), "StatefulSet", "apps/v1"
	case *batchv1.Job:
		tmpl, n, kind, apiVersion = &o.Spec.Template, 1, "Job", "batch/v1"
	default:
		return nil
	}
	started := metav1.Now()
	var pods []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", obj.GetName(), i), Namespace: obj.GetNamespace(),
				UID: "fuzz-pod", ResourceVersion: "12345", CreationTimestamp: started, Labels: tmpl.Labels, Annotations: tmpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: "fuzz-owner",
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: *tmpl.Spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "10.1.0.1", StartTime: &started,
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
					{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started}}},
		}
		p.Spec.NodeName = "node-1"
		for _, c := range tmpl.Spec.InitContainers {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://0123456789abcdef",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started}}})
		}
		for _, c := range tmpl.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://0123456789abcdef", Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}})
		}
		pods = append(pods, p)
	}
	return pods
}
