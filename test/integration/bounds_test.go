package integration

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The CRDs alone (this suite runs no webhook) bound a job's size, on create and through the
// scale subresource, so that no tenant can make the operator build per-pod lists of any size.
func TestJobSizeIsBounded(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)

	huge := testutil.MakeChainerJob("huge", ns).WorkerSet("ws0", 1).Obj()
	testutil.EditWorkerSet(huge, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To[int32](math.MaxInt32) })
	if err := k8s.Create(ctx, huge); err == nil || !strings.Contains(err.Error(), "4095") {
		t.Errorf("a worker set of %d replicas: %v, want a refusal naming the bound 4095", math.MaxInt32, err)
	}

	w := testutil.MakeChainerJob("many", ns)
	for i := range 32 {
		w.WorkerSet(fmt.Sprintf("ws%d", i), 200)
	}
	many := w.Obj()
	if err := k8s.Create(ctx, many); err == nil || !strings.Contains(err.Error(), "would have 6401 pods, more than 4096") {
		t.Errorf("32 worker sets of 200 pods: %v, want a refusal counting 6401 pods", err)
	}

	job := testutil.Load[*troupev1.MPIJob](t, filepath.Join("..", "..", "examples", "mpijob.yaml"), ns)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: math.MaxInt32}}
	err := k8s.SubResource("scale").Update(ctx, job, client.WithSubResourceBody(scale))
	if err == nil || !strings.Contains(err.Error(), "4095") {
		t.Errorf("kubectl scale to %d: %v, want a refusal naming the bound 4095", math.MaxInt32, err)
	}
	scale.Spec.Replicas = troupev1.MaxWorkerReplicas
	if err := k8s.SubResource("scale").Update(ctx, job, client.WithSubResourceBody(scale)); err != nil {
		t.Errorf("scale to the bound %d: %v", troupev1.MaxWorkerReplicas, err)
	}
}
