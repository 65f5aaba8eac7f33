package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Only the lists' entries change, each in its own form: the comments around it and the keys after it stay.
func TestWithFrameworks(t *testing.T) {
	in := `integrations:
  frameworks:
  - batch/job
  # troupe's kinds
  externalFrameworks:
  - Old.v1alpha1.troupe.dev
  - Gone.v1alpha1.troupe.dev
# after
waitForPodsReady:
  timeout: 20s
multiKueue:
  externalFrameworks:
  - name: Old.v1alpha1.troupe.dev
`
	want := `integrations:
  frameworks:
  - batch/job
  # troupe's kinds
  externalFrameworks:
  - A.v1alpha1.troupe.dev
  - B.v1alpha1.troupe.dev
# after
waitForPodsReady:
  timeout: 20s
multiKueue:
  externalFrameworks:
  - name: A.v1alpha1.troupe.dev
  - name: B.v1alpha1.troupe.dev
`
	got, err := withFrameworks([]byte(in), []string{"A.v1alpha1.troupe.dev", "B.v1alpha1.troupe.dev"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := withFrameworks([]byte("integrations: {}\n"), nil); err == nil {
		t.Error("a configuration without the list: no error")
	}
}
