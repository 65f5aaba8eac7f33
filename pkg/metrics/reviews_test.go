package metrics

import (
	"net/http"
	"testing"
)

// Only a token shaped like a JWT (ServiceAccount and OIDC tokens are) is worth a review.
func TestIsJWT(t *testing.T) {
	for token, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl": true,
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.":              true, // unsigned: the review refuses it
		"not-a-token":                                       false,
		"a.b":                                               false,
		"a.b.c.d":                                           false,
		".b.c":                                              false,
		"a..c":                                              false,
		"a.b+/=.c":                                          false,
		"":                                                  false,
		"eyJh bGci.eyJzdWIi.c2ln":                           false,
		"eyJhbGciOiJSUzI1NiJ9.eyJ9.c2ln=":                   false,
	} {
		if got := IsJWT(token); got != want {
			t.Errorf("IsJWT(%q) = %v, want %v", token, got, want)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":  "abc",
		"bearer abc":  "abc",
		"Basic abc":   "",
		"":            "",
		"Bearer":      "",
		"Bearer  abc": "abc",
	} {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		if got := BearerToken(req); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}
