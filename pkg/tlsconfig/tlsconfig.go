// Package tlsconfig holds the TLS settings of the operator's servers (the admission webhooks
// and the metrics endpoint).
package tlsconfig

import "crypto/tls"

// Harden sets what every server of the operator speaks: TLS 1.2 or newer, and HTTP/1.1 only.
// HTTP/2 is off, as kubebuilder's scaffold, JobSet and Kueue turn it off: its stream handling
// made the servers open to the HTTP/2 Rapid Reset and stream-cancellation attacks
// (CVE-2023-44487, CVE-2023-39325), and neither the API server's webhook calls nor Prometheus
// need it.
func Harden(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
