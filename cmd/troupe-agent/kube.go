package main

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig is the pod's own ServiceAccount (in-cluster), or the file $KUBECONFIG names when
// it is set (tests and runs outside a pod).
func restConfig() (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster ServiceAccount and no $KUBECONFIG: %w", err)
	}
	return cfg, nil
}

// podOf maps a host name of the hostfile, <pod>.<service>.<namespace>.svc[...], to the pod's
// namespace and name. A bare name is a pod of the agent's own namespace.
func podOf(host string) (namespace, name string, err error) {
	labels := strings.Split(host, ".")
	name = labels[0]
	if len(labels) >= 3 {
		return labels[2], name, nil
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, name, nil
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return "", "", fmt.Errorf("host %q names no namespace and the agent's own is unknown: %w", host, err)
	}
	return strings.TrimSpace(string(b)), name, nil
}
