package kubeversion

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	kubeversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestCheckKubeVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		info    kubeversion.Info
		wantErr string // "": starts
	}{
		{name: "oldest supported", info: kubeversion.Info{GitVersion: "v1.30.0", Major: "1", Minor: "30"}},
		{name: "newer", info: kubeversion.Info{GitVersion: "v1.35.6", Major: "1", Minor: "35"}},
		{name: "vendor suffix", info: kubeversion.Info{GitVersion: "v1.31.2-eks-1a2b3c", Major: "1", Minor: "31+"}},
		{name: "k3s", info: kubeversion.Info{GitVersion: "v1.30.4+k3s1", Major: "1", Minor: "30"}},
		{name: "no git version", info: kubeversion.Info{Major: "1", Minor: "33+"}},
		{
			name:    "too old",
			info:    kubeversion.Info{GitVersion: "v1.29.15", Major: "1", Minor: "29"},
			wantErr: "the API server runs Kubernetes v1.29.15; troupe needs v1.30 or newer",
		},
		{
			name:    "too old, vendor suffix",
			info:    kubeversion.Info{GitVersion: "v1.28.9-gke.1000", Major: "1", Minor: "28+"},
			wantErr: "the API server runs Kubernetes v1.28.9-gke.1000; troupe needs v1.30 or newer",
		},
		{name: "unreadable", info: kubeversion.Info{GitVersion: "master"}, wantErr: `cannot read the API server's version (gitVersion "master"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := tc.info
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &info}
			found, err := Check(d)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr == "" && found != tc.info.GitVersion:
				t.Errorf("found %q, want %q", found, tc.info.GitVersion)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("the message is more than one line: %q", err)
			case err != nil && !strings.Contains(err.Error(), "--skip-kube-version-check"):
				t.Errorf("the message does not name the flag that overrides it: %q", err)
			}
		})
	}
}

func TestCheckKubeVersionUnreachable(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.AddReactor("get", "version", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := Check(d); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v, want the API server's", err)
	}
}

// The floor the operator enforces is the minor whose kube-apiserver make test-integration-oldest
// runs the suites against.
func TestMinKubeVersionIsTested(t *testing.T) {
	mk, err := os.ReadFile("../../hack/versions.mk")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_OLDEST_VERSION\s*\?=\s*(\S+)\s*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("hack/versions.mk sets no KUBE_OLDEST_VERSION")
	}
	oldest := version.MustParseGeneric(string(m[1]))
	if oldest.Major() != Min.Major() || oldest.Minor() != Min.Minor() {
		t.Errorf("the operator needs v%s; make test-integration-oldest tests %s", Min, m[1])
	}
}

// --container-restart-rules: auto is on from 1.35 (the gate's beta), off before it and when
// the version is unknown (--skip-kube-version-check); true and false are as said; anything
// else is refused, naming the flag.
func TestContainerRestartRules(t *testing.T) {
	for _, tt := range []struct {
		flag, version string
		want          bool
	}{
		{"auto", "v1.35.6", true}, {"auto", "v1.36.0-eks-1a2b", true}, {"auto", "v1.34.3", false},
		{"auto", "", false}, {"true", "v1.30.14", true}, {"false", "v1.35.6", false},
	} {
		got, err := ContainerRestartRules(tt.flag, tt.version)
		if err != nil || got != tt.want {
			t.Errorf("%s on %q: %v, %v; want %v", tt.flag, tt.version, got, err, tt.want)
		}
	}
	if _, err := ContainerRestartRules("yes", "v1.35.6"); err == nil || !strings.Contains(err.Error(), "--container-restart-rules") {
		t.Errorf("yes: %v, want an error naming the flag", err)
	}
}
