package testing

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ApplyKustomization creates what `kubectl apply -k dir` would, with c, namespaces first, as
// kubectl orders them. edit may change each object first, or return false to leave it out
// (a Deployment on an API server without a kubelet, say).
func ApplyKustomization(ctx context.Context, c client.Client, dir string, edit func(*unstructured.Unstructured) bool) error {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return err
	}
	resources := res.Resources()
	slices.SortStableFunc(resources, func(a, b *resource.Resource) int {
		first := func(r *resource.Resource) int {
			if r.GetKind() == "Namespace" {
				return 0
			}
			return 1
		}
		return cmp.Compare(first(a), first(b))
	})
	for _, r := range resources {
		m, err := r.Map()
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: m}
		if !edit(obj) {
			continue
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}
