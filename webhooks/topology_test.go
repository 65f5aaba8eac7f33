package webhooks

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateTopologyAnnotations(t *testing.T) {
	path := field.NewPath("spec", "worker", "template", "metadata", "annotations")
	tests := []struct {
		name string
		ann  map[string]string
		want string // "" for none
	}{
		{name: "none", ann: nil},
		{name: "required rack", ann: map[string]string{"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}},
		{name: "slice of 4 racks", ann: map[string]string{"kueue.x-k8s.io/podset-slice-required-topology": "example.com/rack", "kueue.x-k8s.io/podset-slice-size": "4"}},
		{name: "empty level", ann: map[string]string{"kueue.x-k8s.io/podset-required-topology": ""},
			want: `spec.worker.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Invalid value: "": must name a level of the Topology`},
		{name: "level not a label key", ann: map[string]string{"kueue.x-k8s.io/podset-preferred-topology": "rack name"},
			want: `annotations[kueue.x-k8s.io/podset-preferred-topology]: Invalid value: "rack name": must name a level`},
		{name: "two requests", ann: map[string]string{"kueue.x-k8s.io/podset-required-topology": "r", "kueue.x-k8s.io/podset-unconstrained-topology": "true"},
			want: "a pod set asks for one topology only; it also has kueue.x-k8s.io/podset-required-topology"},
		{name: "unconstrained not boolean", ann: map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "always"},
			want: `annotations[kueue.x-k8s.io/podset-unconstrained-topology]: Invalid value: "always": must be true or false`},
		{name: "slice without size", ann: map[string]string{"kueue.x-k8s.io/podset-slice-required-topology": "r"},
			want: "annotations[kueue.x-k8s.io/podset-slice-size]: Required value"},
		{name: "size of zero", ann: map[string]string{"kueue.x-k8s.io/podset-slice-required-topology": "r", "kueue.x-k8s.io/podset-slice-size": "0"},
			want: "must be a whole number of pods, at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateTopologyAnnotations(path, tc.ann)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v, want one containing %q", errs.ToAggregate(), tc.want)
			}
		})
	}
}
