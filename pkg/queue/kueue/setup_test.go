package kueue

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/event"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The integration is on exactly when the API server serves Kueue's Workloads; a cluster without
// Kueue's CRDs answers 404 for the group version, which is no error.
func TestAvailable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources []metav1.APIResource
		status    int
		want      bool
	}{
		{name: "Kueue installed", resources: []metav1.APIResource{{Name: "workloads", Kind: "Workload"}}, status: http.StatusOK, want: true},
		{name: "no Kueue CRDs", status: http.StatusNotFound, want: false},
		{name: "the group without Workloads", resources: []metav1.APIResource{{Name: "clusterqueues", Kind: "ClusterQueue"}}, status: http.StatusOK, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/kueue.x-k8s.io/v1beta2" || tc.status != http.StatusOK {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{
					TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
					GroupVersion: "kueue.x-k8s.io/v1beta2", APIResources: tc.resources,
				})
			}))
			defer srv.Close()
			got, err := Available(&rest.Config{Host: srv.URL})
			if err != nil || got != tc.want {
				t.Errorf("Available = %t, %v; want %t, no error", got, err, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	if _, err := Available(&rest.Config{Host: srv.URL}); err == nil {
		t.Error("a failing API server gave no error")
	}
}

// The Workload controller is woken only by jobs it has work for: a job a queue holds (before or
// after the update, so a label removed is seen) and any job deleted; a job of no queue, created
// or writing its status, wakes nothing (its pass read the job and did nothing).
func TestQueuedJobEvents(t *testing.T) {
	job := func(labels map[string]string) *troupev1.MPIJob {
		return &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ml", Labels: labels}}
	}
	plain, held := job(nil), job(map[string]string{troupev1.LabelQueueName: "team-a"})
	for name, c := range map[string]struct {
		got, want bool
	}{
		"a job of no queue created":          {queuedJobEvents.Create(event.CreateEvent{Object: plain}), false},
		"a job of no queue updated":          {queuedJobEvents.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: plain}), false},
		"a job of no queue deleted":          {queuedJobEvents.Delete(event.DeleteEvent{Object: plain}), true},
		"a queued job created":               {queuedJobEvents.Create(event.CreateEvent{Object: held}), true},
		"a queued job updated":               {queuedJobEvents.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: held}), true},
		"a job given a queue":                {queuedJobEvents.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: held}), true},
		"a job whose queue label was taken":  {queuedJobEvents.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: plain}), true},
		"a job labelled with an empty queue": {queuedJobEvents.Create(event.CreateEvent{Object: job(map[string]string{troupev1.LabelQueueName: ""})}), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: wakes the Workload controller %v, want %v", name, c.got, c.want)
		}
	}
}
