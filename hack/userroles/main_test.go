package main

import (
	"strings"
	"testing"
)

// A kind's resource and status are in every role, its scale only where its CRD serves scale,
// and only the edit and admin roles may write.
func TestRolesFollowTheCRDs(t *testing.T) {
	scaled, err := parseCRD([]byte(`spec:
  names: {plural: foojobs}
  versions:
  - subresources: {scale: {specReplicasPath: .spec.replicas}, status: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := parseCRD([]byte(`spec:
  names: {plural: barjobs}
  versions:
  - subresources: {status: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !scaled.scale || plain.scale {
		t.Fatalf("scale: foojobs %v, barjobs %v; want true, false", scaled.scale, plain.scale)
	}
	got := string(roles([]crd{scaled, plain}))
	for _, want := range []string{
		"resources: [barjobs, foojobs,\n    barjobs/status, foojobs/status,\n    foojobs/scale]\n  verbs: [get, list, watch]\n",
		"resources: [barjobs, foojobs]\n  verbs: [get, list, watch, create, update, patch, delete, deletecollection]\n",
		"resources: [foojobs/scale]\n  verbs: [get, list, watch, update, patch]\n",
		"name: troupe-view", "name: troupe-edit", "name: troupe-admin",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("roles lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "create, update"); n != 2 {
		t.Errorf("%d roles may create jobs, want 2 (edit and admin)", n)
	}
	if _, err := parseCRD([]byte("spec: {}\n")); err == nil {
		t.Error("a CRD without a plural: no error")
	}
}
