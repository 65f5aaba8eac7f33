package integration

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"

	"github.com/troupe-dev/troupe/pkg/kubeversion"
)

// The operator's start-up check passes on the API server the suite runs against: the current
// Kubernetes (make test-integration) and the oldest supported (make test-integration-oldest).
func TestKubeVersionCheckPasses(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	found, err := kubeversion.Check(dc)
	if err != nil {
		t.Fatalf("the operator would refuse to start: %v", err)
	}
	v, err := version.ParseGeneric(found)
	if err != nil {
		t.Fatalf("found version %q: %v", found, err)
	}
	if v.LessThan(kubeversion.Min) {
		t.Errorf("passed on %s, older than v%s", found, kubeversion.Min)
	}
	t.Logf("API server %s, oldest supported v%s", found, kubeversion.Min)
}
