package certscope

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

func TestListsAndWatchesSelectTheName(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
	}))
	defer srv.Close()
	cfg := Config(&rest.Config{Host: srv.URL}, map[string]string{"/api/v1/namespaces/sys/secrets": "cert"})
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, uri string }{
		{http.MethodGet, "/api/v1/namespaces/sys/secrets?watch=true&fieldSelector=metadata.name%3Dother"},
		{http.MethodGet, "/api/v1/namespaces/sys/secrets?limit=500"},
		{http.MethodGet, "/api/v1/namespaces/sys/secrets/cert"},
		{http.MethodPut, "/api/v1/namespaces/sys/secrets"},
		{http.MethodGet, "/api/v1/namespaces/app/secrets?limit=500"},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.uri, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	want := []string{
		"GET /api/v1/namespaces/sys/secrets?fieldSelector=metadata.name%3Dcert&watch=true",
		"GET /api/v1/namespaces/sys/secrets?fieldSelector=metadata.name%3Dcert&limit=500",
		"GET /api/v1/namespaces/sys/secrets/cert",
		"PUT /api/v1/namespaces/sys/secrets",
		"GET /api/v1/namespaces/app/secrets?limit=500",
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("request %d = %q, want %q", i, got, want[i])
		}
	}
}
