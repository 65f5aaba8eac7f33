package webhookcerts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestExternalIssuer: with --webhook-cert-rotation=false (the chart's certManager.enabled), the
// operator serves the certificate another issuer put in the Secret and leaves the Secret and the
// webhook configurations' caBundle to that issuer. The test plays cert-manager and its CA
// injector: a CA and a serving certificate in a kubernetes.io/tls Secret (tls.crt, tls.key,
// ca.crt), the CA in every webhook's caBundle. The operator is ready, a job is defaulted through
// its webhooks, and neither the Secret nor a caBundle was rewritten.
func TestExternalIssuer(t *testing.T) {
	bin := buildOperator(t)
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	c := startCluster(t)
	ctx := context.Background()

	caPEM, certPEM, keyPEM := issue(t, "localhost")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "troupe-webhook-cert", Namespace: "troupe-system"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	}
	// The issuer's Secret replaces the empty one webhooks-local.sh made for the rotator.
	if err := c.k8s.Delete(ctx, secret.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := c.k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var mutating admissionv1.MutatingWebhookConfiguration
	var validating admissionv1.ValidatingWebhookConfiguration
	for _, obj := range []client.Object{&mutating, &validating} {
		name := "troupe-mutating-webhook-configuration"
		if obj == &validating {
			name = "troupe-validating-webhook-configuration"
		}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			t.Fatal(err)
		}
	}
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	if err := c.k8s.Update(ctx, &mutating); err != nil {
		t.Fatal(err)
	}
	if err := c.k8s.Update(ctx, &validating); err != nil {
		t.Fatal(err)
	}

	logPath := c.startOperator(t, bin, "--webhook-cert-dir", filepath.Join(t.TempDir(), "certs"),
		"--webhook-write-certs", "--webhook-cert-rotation=false")
	c.checkServing(t, logPath, "external")

	var after corev1.Secret
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(secret), &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != secret.ResourceVersion {
		t.Errorf("the operator rewrote the issuer's Secret (keys now %v)", keysOf(after.Data))
	}
	var validatingAfter admissionv1.ValidatingWebhookConfiguration
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(&validating), &validatingAfter); err != nil {
		t.Fatal(err)
	}
	for _, w := range validatingAfter.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, caPEM) {
			t.Errorf("webhook %s: the caBundle is not the issuer's CA any more", w.Name)
		}
	}
}

// issue makes a CA and a serving certificate for dnsName signed by it, PEM-encoded.
func issue(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey, servingKey := newKey(), newKey()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "external-issuer-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(servingKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func keysOf(m map[string][]byte) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
