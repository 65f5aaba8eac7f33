package e2e

import (
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clientcmdapiConfig is a kubeconfig of one cluster and one bearer token.
func clientcmdapiConfig(server string, ca []byte, token string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "sa"}
	cfg.CurrentContext = "sa"
	return cfg
}
