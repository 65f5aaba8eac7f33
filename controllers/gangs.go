package controllers

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The gang providers' PodGroups are children of jobs.
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;update;patch;delete

// podGroups are the PodGroup API of each gang provider, in a fixed order: discovery looks for
// them and the available ones are watched.
var podGroups = []struct {
	provider troupev1.GangProvider
	gv       string
	newObj   func() client.Object
}{
	{troupev1.GangVolcano, volcanov1beta1.SchemeGroupVersion.String(), func() client.Object { return &volcanov1beta1.PodGroup{} }},
	{troupev1.GangCoscheduling, schedv1alpha1.SchemeGroupVersion.String(), func() client.Object { return &schedv1alpha1.PodGroup{} }},
}

// GangTypes are the PodGroup types of the available gang providers.
func GangTypes(available map[troupev1.GangProvider]bool) []client.Object {
	var out []client.Object
	for _, pg := range podGroups {
		if available[pg.provider] {
			out = append(out, pg.newObj())
		}
	}
	return out
}

// DiscoverGangs finds which gang providers' PodGroup CRDs the cluster serves. The operator
// watches only those; a job asking for another one is told so. Installing a provider later
// takes a restart of the operator.
func DiscoverGangs(cfg *rest.Config) (map[troupev1.GangProvider]bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	found := map[troupev1.GangProvider]bool{}
	for _, pg := range podGroups {
		provider, gv := pg.provider, pg.gv
		resources, err := dc.ServerResourcesForGroupVersion(gv)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, r := range resources.APIResources {
			if r.Kind == "PodGroup" {
				found[provider] = true
			}
		}
	}
	return found, nil
}
