package testing

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The ServiceAccount whose token scrapes a local operator's metrics, as Prometheus's does in
// a cluster: bound to the install's ClusterRole troupe-metrics-reader. Its name is not troupe-*:
// it is the tests' own, and outlives the installs the real-node tests check for leftovers.
const (
	metricsReaderNamespace = "default"
	metricsReaderName      = "tests-metrics-scraper"
)

// metricsReaderToken installs config/rbac/operator's troupe-metrics-reader ClusterRole in the
// cluster of kubeconfig (if it is not there), binds it to a ServiceAccount and returns a token
// of that account.
func metricsReaderToken(repoRoot, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "operator", "metrics_reader.yaml"))
	if err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return "", fmt.Errorf("metrics_reader.yaml: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName, Namespace: metricsReaderNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ServiceAccount %s: %w", sa.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ClusterRoleBinding %s: %w", binding.Name, err)
	}
	// Long enough for the longest suite; the API server may shorten it to its maximum.
	expiry := int64((2 * time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s: %w", sa.Name, err)
	}
	return tr.Status.Token, nil
}

// metricsClient scrapes the endpoint as the shipped ServiceMonitor has Prometheus do: the
// self-signed certificate not verified, a bearer token.
var metricsClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the endpoint's certificate is self-signed
}

// Metrics returns the operator's /metrics, in Prometheus's text format, read with
// MetricsToken.
func (o *Operator) Metrics(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.MetricsURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+o.MetricsToken)
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", o.MetricsURL, resp.Status)
	}
	return body, nil
}
