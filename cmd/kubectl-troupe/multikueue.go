package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// dispatch is where Kueue's MultiKueue sent a job of this (the manager) cluster: its Workload
// and the worker cluster that admitted it ("" while it waits), with the MultiKueue check's word.
type dispatch struct {
	workload, cluster, message string
}

// workloadList is Kueue's Workloads, read without Kueue's types.
var workloadList = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"}

// dispatchOf says where MultiKueue dispatched a job whose spec.managedBy is
// kueue.x-k8s.io/multikueue (nil for any other job): its Workload's status.clusterName and the
// MultiKueue admission check's message.
func (s *session) dispatchOf(ctx context.Context, j job) (*dispatch, error) {
	q, ok := j.obj.(troupev1.QueuedJob)
	if !ok || !troupev1.DispatchedByMultiKueue(q) {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadList)
	if err := s.client.List(ctx, list, client.InNamespace(j.obj.GetNamespace())); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return &dispatch{message: "its Workload cannot be read: " + err.Error()}, nil
		}
		return nil, fmt.Errorf("list Workloads: %w", err)
	}
	for _, wl := range list.Items {
		owner := metav1.GetControllerOf(&wl)
		if owner == nil || owner.UID != j.obj.GetUID() {
			continue
		}
		d := &dispatch{workload: wl.GetName()}
		d.cluster, _, _ = unstructured.NestedString(wl.Object, "status", "clusterName")
		checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
		for _, c := range checks {
			if m, ok := c.(map[string]any); ok {
				if msg, _ := m["message"].(string); msg != "" {
					d.message = fmt.Sprintf("%v (%v): %s", m["name"], m["state"], msg)
				}
			}
		}
		return d, nil
	}
	return &dispatch{message: "no Workload yet"}, nil
}

// withRunsIn adds the column RUNS IN to a table of jobs when one of them is dispatched by
// MultiKueue: the worker cluster that runs it, "(waiting)" before it is dispatched, "-" for a
// job this cluster runs itself.
func (s *session) withRunsIn(ctx context.Context, jobs []job, header []string, rows [][]string) ([]string, [][]string, error) {
	cells := make([]string, len(jobs))
	dispatched := false
	for i, j := range jobs {
		d, err := s.dispatchOf(ctx, j)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case d == nil:
			cells[i] = "-"
		case d.cluster != "":
			cells[i], dispatched = d.cluster, true
		default:
			cells[i], dispatched = "(waiting)", true
		}
	}
	if !dispatched {
		return header, rows, nil
	}
	for i := range rows {
		rows[i] = append(rows[i], cells[i])
	}
	return append(header, "RUNS IN"), rows, nil
}

// line is how describe says it: "cluster w1 (Kueue MultiKueue, Workload x)" or why not yet.
func (d *dispatch) line() string {
	switch {
	case d.cluster != "":
		return fmt.Sprintf("worker cluster %s (dispatched by Kueue's MultiKueue, Workload %s)", d.cluster, d.workload)
	case d.workload != "":
		return fmt.Sprintf("not dispatched yet (Kueue's MultiKueue, Workload %s): %s", d.workload, orNone(d.message))
	}
	return "not dispatched yet (Kueue's MultiKueue): " + d.message
}

// workerContext is the context of the user's kubeconfig for the worker cluster, named as the
// MultiKueueCluster is, or "".
func (o *options) workerContext(cluster string) string {
	raw, err := o.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	if _, ok := raw.Contexts[cluster]; ok {
		return cluster
	}
	return ""
}

// workerOptions are the flags' kubeconfig and namespace with the worker cluster's context.
func (o *options) workerOptions(context string) *options {
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig, flags.Namespace, flags.Context = o.flags.KubeConfig, o.flags.Namespace, &context
	return &options{streams: o.streams, flags: flags}
}
