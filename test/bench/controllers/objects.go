package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

const (
	// jobLabel names the bench job an object or pod belongs to; roleLabel says launcher or
	// worker. Every side puts both on its pod templates.
	jobLabel  = "bench.troupe.dev/job"
	roleLabel = "bench.troupe.dev/role"
	// simDuration is the launcher's simulated run time (hack/controlplane/pod-stages.yaml): a
	// Go duration, or an RFC 3339 time it runs until. Launchers start held for a day, longer
	// than any run takes to start its pods (3,000 jobs took 81 minutes here: the launchers held
	// for an hour before ended on their own); the bench sets it to one instant for all of them
	// once every pod of the side is Running.
	simDuration = "troupe.dev/sim-duration"
	held        = "24h"
	image       = "bench.local/mpi:sim"
)

// sideKind is one way of running MPI jobs: what a job is, how to create one, when it is final.
type sideKind struct {
	name string
	// job is the resource whose status says a job is final.
	job   schema.GroupVersionResource
	final func(*unstructured.Unstructured) bool
	// objects are what one job's create sends, in order.
	objects func(ns, name string, workers int) []*unstructured.Unstructured
	// throttled: the objects are created by the client under test (the limit) at the
	// operators' QPS/burst, through the counting proxy; else by a user, unthrottled.
	throttled bool
}

var (
	batchJobs    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	troupeJobs   = schema.GroupVersionResource{Group: "troupe.dev", Version: "v1alpha1", Resource: "mpijobs"}
	kubeflowJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}
)

var sideKinds = map[string]sideKind{
	"limit":        {name: "limit", job: batchJobs, final: conditionTrue("Complete", "Failed"), objects: limitObjects, throttled: true},
	"troupe":       {name: "troupe", job: troupeJobs, final: troupeFinal, objects: troupeObjects},
	"troupe-a":     {name: "troupe-a", job: troupeJobs, final: troupeFinal, objects: troupeObjects},
	"troupe-b":     {name: "troupe-b", job: troupeJobs, final: troupeFinal, objects: troupeObjects},
	"mpi-operator": {name: "mpi-operator", job: kubeflowJobs, final: conditionTrue("Succeeded", "Failed"), objects: kubeflowObjects},
}

// gvrOf is the resource of each kind the sides create.
var gvrOf = map[string]schema.GroupVersionResource{
	"Service":                     {Version: "v1", Resource: "services"},
	"ConfigMap":                   {Version: "v1", Resource: "configmaps"},
	"Secret":                      {Version: "v1", Resource: "secrets"},
	"StatefulSet":                 {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"Job":                         batchJobs,
	"NetworkPolicy":               {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	"MPIJob/troupe.dev/v1alpha1":  troupeJobs,
	"MPIJob/kubeflow.org/v2beta1": kubeflowJobs,
}

func createObject(ctx context.Context, c dynamic.Interface, u *unstructured.Unstructured) error {
	key := u.GetKind()
	if key == "MPIJob" {
		key += "/" + u.GetAPIVersion()
	}
	gvr, ok := gvrOf[key]
	if !ok {
		return fmt.Errorf("no resource for %s", key)
	}
	_, err := c.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	return err
}

func obj(apiVersion, kind, ns, name, job string, rest map[string]any) *unstructured.Unstructured {
	m := map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": map[string]any{jobLabel: job}},
	}
	for k, v := range rest {
		m[k] = v
	}
	return &unstructured.Unstructured{Object: m}
}

// podTemplate is a pod of the job with the bench's labels; a launcher is held Running.
func podTemplate(job, role, container string) map[string]any {
	meta := map[string]any{"labels": map[string]any{jobLabel: job, roleLabel: role}}
	if role == "launcher" {
		meta["annotations"] = map[string]any{simDuration: held}
	}
	return map[string]any{
		"metadata": meta,
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": container, "image": image, "command": []any{"sleep", "inf"}}},
		},
	}
}

// limitLike gives the limit's objects features of troupe's (-limit-like), one at a time, to
// find which of them slows kube-controller-manager's Job controller on troupe's launcher Jobs:
//
//	init     the launcher has an init container, as troupe's troupe-wait
//	service  the headless Service selects the launcher too, not-ready addresses published
//	policy   the launcher Job has troupe's pod failure policy and podReplacementPolicy Failed
//	netpol   a NetworkPolicy per job (a sixth object)
//	checks   the two requests troupe makes before a new job's pods can start besides its
//	         creates (checkBeforeCreate): a write before the Secret is created (troupe writes
//	         the job's status with the Secret's record) and a read of the launcher Job's name
//	         before the StatefulSet's pods start (troupe's check for a foreign Job of that name)
var limitLike = map[string]bool{}

// checkBeforeCreate makes, with -limit-like checks, the request troupe makes before creating
// u: before the Secret, a write (an annotation on the job's ConfigMap, created before it, in
// place of troupe's status write); before the StatefulSet, a read of the launcher Job's name,
// which does not exist yet.
func checkBeforeCreate(ctx context.Context, c dynamic.Interface, u *unstructured.Unstructured, job string) error {
	if !limitLike["checks"] {
		return nil
	}
	switch u.GetKind() {
	case "Secret":
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench.troupe.dev/secret":%q}}}`, u.GetName()))
		_, err := c.Resource(gvrOf["ConfigMap"]).Namespace(u.GetNamespace()).Patch(ctx, job+"-hostfile", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	case "StatefulSet":
		_, err := c.Resource(gvrOf["Job"]).Namespace(u.GetNamespace()).Get(ctx, job+"-launcher", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// limitObjects are the five objects one MPI job needs, as an operator would create them.
func limitObjects(ns, name string, workers int) []*unstructured.Unstructured {
	hosts := ""
	for i := range workers {
		hosts += fmt.Sprintf("%s-worker-%d.%s-worker slots=1\n", name, i, name)
	}
	worker := podTemplate(name, "worker", "mpi-worker")
	launcher := podTemplate(name, "launcher", "launcher")
	launcher["spec"].(map[string]any)["restartPolicy"] = "Never"
	selector := map[string]any{jobLabel: name, roleLabel: "worker"}
	jobSpec := map[string]any{"backoffLimit": int64(0), "template": launcher}
	if limitLike["init"] {
		launcher["spec"].(map[string]any)["initContainers"] = []any{map[string]any{"name": "troupe-wait", "image": image, "command": []any{"true"}}}
	}
	if limitLike["service"] {
		selector = map[string]any{jobLabel: name}
	}
	if limitLike["policy"] {
		jobSpec["podReplacementPolicy"] = "Failed"
		jobSpec["podFailurePolicy"] = map[string]any{"rules": []any{map[string]any{
			"action": "FailJob", "onExitCodes": map[string]any{"containerName": "troupe-wait", "operator": "In", "values": []any{int64(3)}},
		}}}
	}
	var extra []*unstructured.Unstructured
	if limitLike["netpol"] {
		extra = append(extra, obj("networking.k8s.io/v1", "NetworkPolicy", ns, name, name, map[string]any{"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{jobLabel: name}},
			"ingress":     []any{map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{jobLabel: name}}}}}},
		}}))
	}
	return append([]*unstructured.Unstructured{
		obj("v1", "Service", ns, name+"-worker", name, map[string]any{"spec": map[string]any{
			"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": limitLike["service"],
		}}),
		obj("v1", "ConfigMap", ns, name+"-hostfile", name, map[string]any{"data": map[string]any{"hostfile": hosts}}),
		obj("v1", "Secret", ns, name+"-ssh", name, map[string]any{"type": "kubernetes.io/ssh-auth",
			"stringData": map[string]any{"ssh-privatekey": "simulated key of " + name}}),
		obj("apps/v1", "StatefulSet", ns, name+"-worker", name, map[string]any{"spec": map[string]any{
			"replicas": int64(workers), "serviceName": name + "-worker", "podManagementPolicy": "Parallel",
			"selector": map[string]any{"matchLabels": map[string]any{jobLabel: name, roleLabel: "worker"}},
			"template": worker,
		}}),
		obj("batch/v1", "Job", ns, name+"-launcher", name, map[string]any{"spec": jobSpec}),
	}, extra...)
}

// troupeObjects is a troupe MPIJob with cleanPodPolicy None, mpi-operator's default: the workers
// stay when the launcher ends, as on the other two sides, so no side scales or deletes them and
// all three do the same work (troupe's own default, Running, releases them with one StatefulSet
// write per job; docs/performance.md).
func troupeObjects(ns, name string, workers int) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{obj("troupe.dev/v1alpha1", "MPIJob", ns, name, name, map[string]any{"spec": map[string]any{
		"launcher":  map[string]any{"template": podTemplate(name, "launcher", "launcher")},
		"worker":    map[string]any{"replicas": int64(workers), "template": podTemplate(name, "worker", "mpi-worker")},
		"runPolicy": map[string]any{"cleanPodPolicy": "None"},
	}})}
}

func kubeflowObjects(ns, name string, workers int) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{obj("kubeflow.org/v2beta1", "MPIJob", ns, name, name, map[string]any{"spec": map[string]any{
		"slotsPerWorker": int64(1),
		"mpiReplicaSpecs": map[string]any{
			"Launcher": map[string]any{"replicas": int64(1), "template": podTemplate(name, "launcher", "launcher")},
			"Worker":   map[string]any{"replicas": int64(workers), "template": podTemplate(name, "worker", "mpi-worker")},
		},
	}})}
}

func troupeFinal(u *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return phase == "Succeeded" || phase == "Failed"
}

// conditionTrue: final once one of the condition types is True.
func conditionTrue(types ...string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			for _, t := range types {
				if m["type"] == t && m["status"] == "True" {
					return true
				}
			}
		}
		return false
	}
}
