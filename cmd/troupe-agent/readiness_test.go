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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// fakePods serves GET of the given pods of namespace ml, as the API server would, and points
// $KUBECONFIG at it for the test. Any other request fails the test.
func fakePods(t *testing.T, pods ...corev1.Pod) {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/ml/pods/") {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		for _, pod := range pods {
			if pod.Name == filepath.Base(r.URL.Path) {
				pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(pod)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(api.Close)
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
}

func pod(name, jobUID string, ready corev1.ConditionStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{troupev1.LabelJobUID: jobUID}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
}

// The KubeExec wait counts a worker only once its pod is Ready: a worker's readinessProbe is how
// it says it is prepared (the FFFFFaraway form's workers install their code first).
func TestPodReadyFollowsTheReadyCondition(t *testing.T) {
	fakePods(t, pod("w-0", "u1", corev1.ConditionTrue), pod("w-1", "u1", corev1.ConditionFalse))
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

// The agent execs only into pods of the launcher's own job: a pod of another job is refused
// before any exec request is made (fakePods fails the test on one).
func TestExecOnlyIntoPodsOfTheOwnJob(t *testing.T) {
	fakePods(t, pod("mine-0", "u1", corev1.ConditionTrue), pod("theirs-0", "u2", corev1.ConditionTrue))
	t.Setenv(mpi.EnvJobUID, "u1")
	code, err := execInPod(context.Background(), "theirs-0.theirs.ml.svc", []string{"true"}, nil, nil, nil)
	if code != 255 || err == nil || !strings.Contains(err.Error(), "not of this job") {
		t.Errorf("exec into another job's pod: exit %d, %v; want 255 and a refusal", code, err)
	}
	cfg, err := restConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := ofOwnJob(context.Background(), cs, "ml", "mine-0"); err != nil {
		t.Errorf("a pod of the launcher's own job: %v, want nil", err)
	}
}
