package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// podJobUIDField indexes the operator's cached pods by the value of their job UID label. A
// list by label selector scans every cached pod of the namespace and matches each one's labels,
// so a pass over one job cost O(pods of every job in the namespace), the largest item of the
// operator's CPU profile at 200 jobs (docs/performance.md); through the index a pass reads its
// own job's pods only.
const podJobUIDField = "metadata.labels." + troupev1.LabelJobUID

// SetupIndexes registers the cache indexes the engine's reconcilers list by. Every kind's
// reconciler shares the manager's cache, so it is called once per manager (kinds.SetupControllers),
// before the reconcilers are set up.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, podJobUIDField, podJobUID); err != nil {
		return fmt.Errorf("index pods by %s: %w", troupev1.LabelJobUID, err)
	}
	return nil
}

// podJobUID is the value a pod is indexed under: its job UID label, if it has one.
func podJobUID(o client.Object) []string {
	if uid, ok := o.GetLabels()[troupev1.LabelJobUID]; ok {
		return []string{uid}
	}
	return nil
}
