package testing

import "k8s.io/client-go/rest"

// AsServiceAccount is cfg (a cluster admin's) turned into the ServiceAccount namespace/name, as
// the API server names it and with its groups: the identity of an operator pod, without one.
func AsServiceAccount(cfg *rest.Config, namespace, name string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return out
}
