// Package kubeversion holds the oldest Kubernetes troupe supports and the operator's start-up
// check of the API server against it.
package kubeversion

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
)

// Min is the oldest Kubernetes troupe supports: ValidatingAdmissionPolicy v1, which
// the operator guard (config/install/operator-guard.yaml) is written in, is served from 1.30.
// docs/operations.md, "Supported Kubernetes versions", says what sets it; the integration and
// admission suites run against it (make test-integration-oldest, KUBE_OLDEST_VERSION of
// hack/versions.mk, whose minor a unit test keeps equal).
var Min = version.MajorMinor(1, 30)

// Check asks the API server its version and fails, in one line naming both versions,
// when it is older than Min. It returns the version found.
func Check(d discovery.ServerVersionInterface) (string, error) {
	info, err := d.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("ask the API server its version: %w", err)
	}
	found, err := serverVersion(info.GitVersion, info.Major, info.Minor)
	if err != nil {
		return "", err
	}
	if found.LessThan(Min) {
		return "", fmt.Errorf("the API server runs Kubernetes %s; troupe needs v%d.%d or newer (docs/operations.md, "+
			"\"Supported Kubernetes versions\"); --skip-kube-version-check starts it anyway",
			info.GitVersion, Min.Major(), Min.Minor())
	}
	return info.GitVersion, nil
}

// serverVersion reads the API server's version from its git version (v1.30.14, v1.31.2-eks-1a2b3c,
// v1.32.0+k3s1) or, failing that, from its major and minor numbers (a managed cluster's minor
// may read 30+).
func serverVersion(gitVersion, major, minor string) (*version.Version, error) {
	if v, err := version.ParseGeneric(gitVersion); err == nil {
		return v, nil
	}
	v, err := version.ParseGeneric(strings.TrimPrefix(major, "v") + "." + strings.TrimRight(minor, "+"))
	if err != nil {
		return nil, fmt.Errorf("cannot read the API server's version (gitVersion %q, major %q, minor %q); "+
			"--skip-kube-version-check starts without knowing it", gitVersion, major, minor)
	}
	return v, nil
}

// RestartRules is the first Kubernetes whose containers' restartPolicy and restartPolicyRules
// (KEP-5307, feature gate ContainerRestartRules) are on by default: beta in 1.35, alpha before.
var RestartRules = version.MajorMinor(1, 35)

// ContainerRestartRules reads the operator's --container-restart-rules: "true", "false", or
// "auto", which is true when the API server's version (gitVersion, "" when unknown) is
// RestartRules or newer. A cluster that turned the gate off drops the fields, and its pods
// then run as without them (a new pod for each retry), so auto errs on no side that loses work.
func ContainerRestartRules(flag, gitVersion string) (bool, error) {
	switch flag {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto":
		v, err := version.ParseGeneric(gitVersion)
		return err == nil && v.AtLeast(RestartRules), nil
	}
	return false, fmt.Errorf("--container-restart-rules: %q is not one of true, false, auto", flag)
}
