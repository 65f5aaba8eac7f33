package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The KubeExec wait counts a worker only once its pod is Ready: a worker's readinessProbe is how
// it says it is prepared (the FFFFFaraway form's workers install their code first).
func TestPodReadyFollowsTheReadyCondition(t *testing.T) {
	ready := map[string]corev1.ConditionStatus{"w-0": corev1.ConditionTrue, "w-1": corev1.ConditionFalse}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/ml/pods/") {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		status, ok := ready[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pod)
	}))
	defer api.Close()

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: api.URL}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)

	if err := podReady(context.Background(), "w-0.job.ml.svc"); err != nil {
		t.Errorf("a Ready worker: %v, want nil", err)
	}
	if err := podReady(context.Background(), "w-1.job.ml.svc"); err == nil || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("a worker whose readinessProbe fails: %v, want a not-Ready error", err)
	}
	if err := podReady(context.Background(), "w-2.job.ml.svc"); err == nil {
		t.Error("a worker with no pod yet counted as Ready")
	}
}
