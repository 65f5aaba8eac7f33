package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// progressReporter reports a job's training progress as the job's own pod does
// (docs/progress.md): to the URL and with the CA the pod's environment names, with a token of
// the pod's ServiceAccount bound to the pod for the endpoint's audience (what the kubelet
// projects into the pod's token file; here made by `kubectl create token`).
type progressReporter struct {
	url, token string
	client     *http.Client
}

// newProgressReporter reads the first pod of role of the job (by its UID) and makes its reporter.
func newProgressReporter(t *testing.T, ns, jobUID, role string) *progressReporter {
	t.Helper()
	var pod corev1.Pod
	eventually(t, "a "+role+" pod of the job", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{troupev1.LabelJobUID: jobUID, troupev1.LabelRole: role})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = pods.Items[0]
		return true, nil
	})
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	url, ca := env[troupev1.EnvProgressURL], env[troupev1.EnvProgressCA]
	if url == "" || ca == "" {
		t.Fatalf("pod %s has no %s or %s: it is not wired for progress", pod.Name, troupev1.EnvProgressURL, troupev1.EnvProgressCA)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	out, err := kubectl("create", "token", sa, "-n", ns, "--bound-object-kind", "Pod",
		"--bound-object-name", pod.Name, "--audience", progressAudience(t, pod))
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, out)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca)) {
		t.Fatalf("pod %s: %s is no PEM certificate", pod.Name, troupev1.EnvProgressCA)
	}
	return &progressReporter{url: url, token: strings.TrimSpace(out), client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}}
}

// progressAudience is the audience of the token projected into the pod for its reports.
func progressAudience(t *testing.T, pod corev1.Pod) string {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience != "" {
				return s.ServiceAccountToken.Audience
			}
		}
	}
	t.Fatalf("pod %s projects no ServiceAccount token with an audience", pod.Name)
	return ""
}

// report posts a report (current of total steps, metrics) and fails the test unless it is taken.
func (r *progressReporter) report(t *testing.T, current, total int64, metrics map[string]float64) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"current": current, "total": total, "unit": "steps", "metrics": metrics})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatalf("report to %s: %v", r.url, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("report to %s: %s: %s", r.url, resp.Status, msg)
	}
}

// reportProgressUntilETA reports two points of the job's training (the second once the first
// is in its status, so that troupe has a rate) and waits until the job's status has an ETA.
func reportProgressUntilETA(t *testing.T, ns, name string, r *progressReporter) {
	t.Helper()
	progressOf := func(ctx context.Context) (*troupev1.ProgressStatus, error) {
		var j troupev1.ChainerJob
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return nil, err
		}
		return j.Status.Progress, nil
	}
	r.report(t, 10, 1000, map[string]float64{"loss": 2.5})
	eventually(t, name+"'s status.progress at 10 steps", func(ctx context.Context) (bool, error) {
		p, err := progressOf(ctx)
		return p != nil && p.Current == 10, err
	})
	r.report(t, 200, 1000, map[string]float64{"loss": 0.75, "accuracy": 0.5})
	eventually(t, name+"'s status.progress at 200 steps with an ETA", func(ctx context.Context) (bool, error) {
		p, err := progressOf(ctx)
		if err != nil || p == nil {
			return false, err
		}
		if p.Current == 200 && p.EstimatedCompletionTime == nil {
			return false, fmt.Errorf("at 200 steps without an ETA: %+v", *p)
		}
		return p.Current == 200, nil
	})
}
