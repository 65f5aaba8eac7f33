package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// jobKind is one registered troupe kind, as the plugin reads and writes it.
type jobKind struct {
	kinds.Kind
	GVK schema.GroupVersionKind
	// newList returns an empty list of the kind.
	newList func() client.ObjectList
}

// resource is the kind's name as kubectl prints an object's: "mpijob.troupe.dev".
func (k jobKind) resource() string { return strings.ToLower(k.Name) + "." + k.GVK.Group }

// registeredKinds are the kinds of the registry (package kinds), in its order, with their list
// types from the scheme: a new kind shows up here without a change to the plugin.
func registeredKinds(scheme *runtime.Scheme) ([]jobKind, error) {
	var out []jobKind
	for _, k := range kinds.All() {
		gvk := troupev1.GroupVersion.WithKind(k.Name)
		listGVK := troupev1.GroupVersion.WithKind(k.Name + "List")
		if _, err := scheme.New(listGVK); err != nil {
			return nil, fmt.Errorf("kind %s: %w", k.Name, err)
		}
		out = append(out, jobKind{Kind: k, GVK: gvk, newList: func() client.ObjectList {
			l, _ := scheme.New(listGVK) // checked above
			return l.(client.ObjectList)
		}})
	}
	return out, nil
}

// job is one troupe job found in the cluster.
type job struct {
	kind jobKind
	obj  engine.Object
}

// ref is the job as kubectl names an object: "mpijob.troupe.dev/name".
func (j job) ref() string { return j.kind.resource() + "/" + j.obj.GetName() }

// status is the status every kind shares.
func (j job) status() *troupev1.JobStatus { return j.obj.JobStatus() }

// jobArg is a job named on the command line: NAME, or KIND/NAME.
type jobArg struct {
	// kind is what the user wrote before the slash ("" for a bare name).
	kind string
	name string
}

func parseJobArg(arg string) (jobArg, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "", arg
	}
	if name == "" || (found && kind == "") || strings.Contains(name, "/") {
		return jobArg{}, fmt.Errorf("%q is not a job: write NAME or KIND/NAME (for example mpijob/%s)", arg, strings.Trim(name, "/"))
	}
	return jobArg{kind: kind, name: name}, nil
}

// kindNames are the names a user may give a kind by: what discovery lists for its resource
// (plural, singular, short names) and the kind itself, all in lower case, each also qualified
// with the group ("mpijobs.troupe.dev") to tell it from another group's kind of the same name.
type kindNames struct {
	Kind   string
	Plural string
	// Singular and ShortNames may be empty, as in discovery documents of old API servers.
	Singular   string
	ShortNames []string
}

// matchKind returns the kind whose names include name, case-insensitively.
func matchKind(name string, all []kindNames, group string) (string, error) {
	want := strings.ToLower(name)
	want = strings.TrimSuffix(want, "."+group)
	for _, k := range all {
		names := append([]string{strings.ToLower(k.Kind), k.Plural, k.Singular}, k.ShortNames...)
		if want != "" && slices.Contains(names, want) {
			return k.Kind, nil
		}
	}
	var known []string
	for _, k := range all {
		known = append(known, strings.ToLower(k.Kind))
	}
	return "", fmt.Errorf("%q is not a troupe kind: one of %s (singular, plural or short name)", name, strings.Join(known, ", "))
}

// kindByName resolves a kind the user wrote, with the names the API server's discovery gives
// the group's resources (short names come from the CRDs).
func (s *session) kindByName(name string) (jobKind, error) {
	names := make([]kindNames, 0, len(s.kinds))
	for _, k := range s.kinds {
		names = append(names, kindNames{Kind: k.Name, Plural: strings.ToLower(k.Name) + "s"})
	}
	if dc, err := s.flags.ToDiscoveryClient(); err == nil {
		if list, err := dc.ServerResourcesForGroupVersion(troupev1.GroupVersion.String()); err == nil {
			names = discoveredNames(names, list.APIResources)
		}
	}
	kind, err := matchKind(name, names, troupev1.GroupVersion.Group)
	if err != nil {
		return jobKind{}, err
	}
	for _, k := range s.kinds {
		if k.Name == kind {
			return k, nil
		}
	}
	return jobKind{}, fmt.Errorf("kind %s is not registered", kind) // matchKind returned one of s.kinds
}

// discoveredNames fills each kind's names from the group's discovered resources; a kind the
// API server does not serve keeps the names it had.
func discoveredNames(names []kindNames, resources []metav1.APIResource) []kindNames {
	out := slices.Clone(names)
	for i := range out {
		for _, r := range resources {
			if r.Kind == out[i].Kind && !strings.Contains(r.Name, "/") {
				out[i].Plural, out[i].Singular, out[i].ShortNames = r.Name, r.SingularName, r.ShortNames
			}
		}
	}
	return out
}

// notServed reports whether err says the API server does not serve the kind (its CRD is not
// installed): such a kind is skipped when every kind is searched.
func notServed(err error) bool {
	return meta.IsNoMatchError(err) || (apierrors.IsNotFound(err) && isMissingResource(err))
}

// isMissingResource tells a 404 for a resource the server does not serve from one for a
// missing object: the former names no object.
func isMissingResource(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// find returns the job arg names in namespace ns. A bare name is searched among every kind; a
// name two kinds share is refused with the KIND/NAME forms to write instead.
func (s *session) find(ctx context.Context, ns string, arg jobArg) (job, error) {
	candidates := s.kinds
	if arg.kind != "" {
		k, err := s.kindByName(arg.kind)
		if err != nil {
			return job{}, err
		}
		candidates = []jobKind{k}
	}
	var found []job
	for _, k := range candidates {
		obj := k.NewObject()
		err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: arg.name}, obj)
		switch {
		case err == nil:
			found = append(found, job{kind: k, obj: obj})
		case apierrors.IsNotFound(err) && !isMissingResource(err):
		case notServed(err) && arg.kind == "":
		default:
			return job{}, fmt.Errorf("get %s %s/%s: %w", k.Name, ns, arg.name, err)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		if arg.kind != "" {
			return job{}, fmt.Errorf("%s %q not found in namespace %q", strings.ToLower(candidates[0].Name), arg.name, ns)
		}
		return job{}, fmt.Errorf("no troupe job named %q in namespace %q", arg.name, ns)
	}
	refs := make([]string, 0, len(found))
	for _, j := range found {
		refs = append(refs, strings.ToLower(j.kind.Name)+"/"+arg.name)
	}
	return job{}, fmt.Errorf("%q names %d jobs in namespace %q (%s): say which, as KIND/NAME, for example %s",
		arg.name, len(found), ns, strings.Join(refs, ", "), refs[0])
}

// list returns every job of every served kind in namespace ns ("" for all namespaces).
func (s *session) list(ctx context.Context, ns string) ([]job, error) {
	var out []job
	for _, k := range s.kinds {
		l := k.newList()
		if err := s.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			if notServed(err) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", k.Name, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj, ok := item.(engine.Object)
			if !ok {
				return nil, fmt.Errorf("list %s: %T is not a troupe job", k.Name, item)
			}
			out = append(out, job{kind: k, obj: obj})
		}
	}
	return out, nil
}
