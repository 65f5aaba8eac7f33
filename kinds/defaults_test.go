package kinds

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// Defaults live in one place per kind, its SetDefaults in apis/troupe/v1alpha1: the defaulting
// webhook writes its result into the stored job and the adapter builds the children from its
// result on a copy of the stored job. The adapter's build of a job therefore does not depend on
// whether the webhook saw the job, provided that (1) the webhook's defaulting is SetDefaults,
// (2) SetDefaults is idempotent and (3) the adapter reads no field but through it. The test
// below checks (1) and (2) directly and (3) by its consequence, one defaulted field at a time:
// a webhook or an adapter that defaulted a field on its own, differently, fails it.

// defaulter is what every kind's API type has.
type defaulter interface {
	engine.Object
	SetDefaults(troupev1.OperatorDefaults)
}

// A gang provider by default, so that the operator's part of defaulting is exercised too.
var defaultsWebhookOptions = webhooks.Options{DefaultGang: troupev1.GangVolcano}

// defaultsVariants edit an example's manifest so that defaulting meets what it folds or picks
// from: the run policy's limits, the T9k spelling of the clean-up policy, each transport. A
// variant admission refuses (say, SSH for a job of the FFFFFaraway form) is skipped.
var defaultsVariants = map[string]func(spec map[string]any){
	"as written": func(map[string]any) {},
	"run policy limits": func(spec map[string]any) {
		spec["runPolicy"] = map[string]any{"backoffLimit": 2, "activeDeadlineSeconds": 60}
	},
	"cleanUpWorkers false": func(spec map[string]any) { spec["runPolicy"] = map[string]any{"cleanUpWorkers": false} },
	"transport SSH":        func(spec map[string]any) { spec["transport"] = "SSH" },
	"transport KubeExec":   func(spec map[string]any) { spec["transport"] = "KubeExec" },
}

func TestEveryDefaultIsTheAdapters(t *testing.T) {
	adapterOptions := fuzzAdapterOptions
	adapterOptions.DefaultGang = defaultsWebhookOptions.DefaultGang
	for _, ex := range examples(t) {
		for _, variant := range slices.Sorted(maps.Keys(defaultsVariants)) {
			t.Run(filepath.Base(ex.file)+"/"+variant, func(t *testing.T) {
				manifest := deepCopyJSON(ex.obj)
				defaultsVariants[variant](manifest["spec"].(map[string]any))
				raw := decode(t, ex.kind, manifest)
				admitted := raw.DeepCopyObject().(engine.Object)
				if errs := ex.kind.Admit(admitted, defaultsWebhookOptions); len(errs) > 0 {
					t.Skipf("not admitted: %v", errs.ToAggregate())
				}

				// (1) The webhook's defaulting is SetDefaults, (2) which is idempotent.
				defaulted := raw.DeepCopyObject().(defaulter)
				defaulted.SetDefaults(defaultsWebhookOptions.Defaults())
				if diff := cmp.Diff(defaulted, admitted); diff != "" {
					t.Fatalf("the webhook defaults other than SetDefaults (-SetDefaults +webhook):\n%s", diff)
				}
				again := defaulted.DeepCopyObject().(defaulter)
				again.SetDefaults(defaultsWebhookOptions.Defaults())
				if diff := cmp.Diff(defaulted, again); diff != "" {
					t.Fatalf("SetDefaults is not idempotent (-once +twice):\n%s", diff)
				}

				// (3) Each field defaulting writes, left out alone, gives the same children: the
				// adapter assumes for it what the webhook writes.
				want := build(t, ex.kind, adapterOptions, defaulted)
				full := encode(t, defaulted)
				written := defaultedLeaves(full, encode(t, raw))
				if variant == "as written" && len(written) == 0 {
					t.Fatalf("defaulting wrote nothing into %s: the test checks nothing", ex.file)
				}
				for _, path := range written {
					// Stored with the maps above the field, or without those it leaves empty.
					for _, prune := range []bool{false, true} {
						without := deepCopyJSON(full)
						deleteLeaf(without, path, prune)
						got := build(t, ex.kind, adapterOptions, decode(t, ex.kind, without))
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("without its default %s (empty maps above it removed: %t) the adapter builds other children (-defaulted +without):\n%s",
								strings.Join(path, "."), prune, diff)
						}
					}
				}
			})
		}
	}
}

// build describes a job with its kind's adapter and returns the children the engine builds.
func build(t *testing.T, k Kind, o controllers.Options, job engine.Object) []client.Object {
	t.Helper()
	s := describeSpec(k, job)
	if err := k.Adapter(o).Describe(job, s); err != nil {
		t.Fatalf("Describe: %v", err)
	}
	return engine.Children(s, true)
}

func decode(t *testing.T, k Kind, manifest map[string]any) engine.Object {
	t.Helper()
	data, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	job := k.NewObject()
	if err := json.Unmarshal(data, job); err != nil {
		t.Fatal(err)
	}
	job.SetNamespace("defaults")
	return job
}

func encode(t *testing.T, job engine.Object) map[string]any {
	t.Helper()
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// defaultedLeaves are the paths of the values (not maps) of defaulted that raw lacks or has
// otherwise: what defaulting wrote.
func defaultedLeaves(defaulted, raw map[string]any) [][]string {
	var out [][]string
	var walk func(d, r map[string]any, at []string)
	walk = func(d, r map[string]any, at []string) {
		for _, k := range slices.Sorted(maps.Keys(d)) {
			path := append(slices.Clone(at), k)
			dm, isMap := d[k].(map[string]any)
			rm, _ := r[k].(map[string]any)
			dl, isList := d[k].([]any)
			rl, _ := r[k].([]any)
			switch {
			case isMap:
				walk(dm, rm, path)
			case isList && len(dl) == len(rl) && !cmp.Equal(dl, rl):
				// A default inside a list's items (a container's port): walk the items, named
				// by index ("[i]").
				for i := range dl {
					di, dIsMap := dl[i].(map[string]any)
					ri, _ := rl[i].(map[string]any)
					item := append(slices.Clone(path), fmt.Sprintf("[%d]", i))
					switch {
					case dIsMap:
						walk(di, ri, item)
					case !cmp.Equal(dl[i], rl[i]):
						out = append(out, item)
					}
				}
			case !cmp.Equal(d[k], r[k]):
				out = append(out, path)
			}
		}
	}
	walk(defaulted, raw, nil)
	return out
}

// deleteLeaf removes the value at path ("[i]" names a list's item) and, when prune is set,
// each map above it it leaves empty.
func deleteLeaf(m map[string]any, path []string, prune bool) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	var child map[string]any
	rest := path[1:]
	if list, ok := m[path[0]].([]any); ok && strings.HasPrefix(rest[0], "[") {
		var i int
		_, _ = fmt.Sscanf(rest[0], "[%d]", &i)
		child, rest = list[i].(map[string]any), rest[1:]
		if len(rest) == 0 {
			return // an item that is not a map: defaulting wrote it whole, as kept
		}
		deleteLeaf(child, rest, prune)
		return // the item stays, whatever it is left with
	}
	child = m[path[0]].(map[string]any)
	deleteLeaf(child, rest, prune)
	if prune && len(child) == 0 {
		delete(m, path[0])
	}
}
