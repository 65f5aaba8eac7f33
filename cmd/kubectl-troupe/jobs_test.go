package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
)

func TestParseJobArg(t *testing.T) {
	cases := []struct {
		arg     string
		want    jobArg
		wantErr bool
	}{
		{arg: "pi", want: jobArg{name: "pi"}},
		{arg: "mpijob/pi", want: jobArg{kind: "mpijob", name: "pi"}},
		{arg: "MPIJobs.troupe.dev/pi", want: jobArg{kind: "MPIJobs.troupe.dev", name: "pi"}},
		{arg: "/pi", wantErr: true},
		{arg: "mpijob/", wantErr: true},
		{arg: "a/b/c", wantErr: true},
		{arg: "", wantErr: true},
	}
	for _, c := range cases {
		got, err := parseJobArg(c.arg)
		if (err != nil) != c.wantErr {
			t.Errorf("parseJobArg(%q) error = %v, want error %t", c.arg, err, c.wantErr)
			continue
		}
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(jobArg{})); diff != "" {
			t.Errorf("parseJobArg(%q) (-want +got):\n%s", c.arg, diff)
		}
	}
}

func TestMatchKind(t *testing.T) {
	names := discoveredNames(
		[]kindNames{{Kind: "ChainerJob", Plural: "chainerjobs"}, {Kind: "MPIJob", Plural: "mpijobs"}, {Kind: "PyTorchJob", Plural: "pytorchjobs"}},
		[]metav1.APIResource{
			{Name: "mpijobs", SingularName: "mpijob", Kind: "MPIJob", ShortNames: []string{"mpij"}},
			{Name: "mpijobs/status", Kind: "MPIJob"},
			{Name: "chainerjobs", SingularName: "chainerjob", Kind: "ChainerJob", ShortNames: []string{"chj"}},
		})
	cases := map[string]string{
		"MPIJob": "MPIJob", "mpijob": "MPIJob", "mpijobs": "MPIJob", "MPIJOBS": "MPIJob", "mpij": "MPIJob",
		"mpijobs.troupe.dev": "MPIJob", "mpijob.troupe.dev": "MPIJob", "chj": "ChainerJob",
		// Not discovered (an API server without the CRD's names): its kind and plural still work.
		"pytorchjob": "PyTorchJob", "pytorchjobs": "PyTorchJob",
	}
	for in, want := range cases {
		got, err := matchKind(in, names, "troupe.dev")
		if err != nil || got != want {
			t.Errorf("matchKind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"job", "mpijobs.kubeflow.org", "ptj", ""} {
		if got, err := matchKind(in, names, "troupe.dev"); err == nil {
			t.Errorf("matchKind(%q) = %q, want an error", in, got)
		}
	}
}

// Every kind of the registry is one the plugin lists, with its list type and its name as
// kubectl prints objects of it.
func TestRegisteredKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	got, err := registeredKinds(scheme)
	if err != nil {
		t.Fatal(err)
	}
	var names, resources []string
	for _, k := range got {
		names = append(names, k.Name)
		resources = append(resources, k.resource())
		if _, ok := k.newList().(*troupev1.MPIJobList); ok != (k.Name == "MPIJob") {
			t.Errorf("%s: list type %T", k.Name, k.newList())
		}
	}
	var want []string
	for _, k := range kinds.All() {
		want = append(want, k.Name)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("kinds (-registry +plugin):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"chainerjob.troupe.dev", "horovodjob.troupe.dev", "mpijob.troupe.dev", "pytorchjob.troupe.dev"}, resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}
