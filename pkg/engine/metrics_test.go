package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// A reconcile that fails is counted under the job's kind and namespace; one that succeeds is
// not, though its series exists from the first reconcile on.
func TestReconcileErrorsCounted(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	failing := true
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if failing {
				return errors.New("the API server is away")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: events.NewFakeRecorder(10), adapter: masterOnlyAdapter{},
		gvk: schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"}}
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n, err := testutil.GatherAndCount(reg, "troupe_reconcile_errors_total")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "errors-unit", Name: "train"}}
	want := `
# HELP troupe_reconcile_errors_total Reconciles of a job that ended in an error (and are retried with backoff).
# TYPE troupe_reconcile_errors_total counter
troupe_reconcile_errors_total{job_namespace="errors-unit",kind="ChainerJob"} %d
`
	check := func(n int) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(want, n)), "troupe_reconcile_errors_total"); err != nil {
			t.Error(err)
		}
	}
	if _, err := r.instrumented().Reconcile(context.Background(), req); err == nil {
		t.Fatal("the reconcile did not fail")
	}
	check(1)
	failing = false // the job does not exist: nothing to do, no error
	if _, err := r.instrumented().Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	check(1)
	if count() != 1 {
		t.Errorf("%d series, want the one of the job's kind and namespace", count())
	}
}
