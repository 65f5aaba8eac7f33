package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// nameRules returns the rule and message expression of every CEL rule on the root of a kind's
// generated CRD that bounds the length of metadata.name.
func nameRules(t *testing.T, plural string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crds", "troupe.dev_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Validations []struct {
							Rule              string `json:"rule"`
							MessageExpression string `json:"messageExpression"`
						} `json:"x-kubernetes-validations"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range crd.Spec.Versions {
		for _, r := range v.Schema.OpenAPIV3Schema.Validations {
			if strings.Contains(r.Rule, "metadata.name.size()") {
				rules = append(rules, r.Rule+"\n"+r.MessageExpression)
			}
		}
	}
	return rules
}

// The CRDs' CEL rules on the length of a job's name write as literals what the Go functions of
// names.go compute: each number in them must be one the functions give, and each limit must be
// there. A changed suffix or limit fails here until the markers follow.
func TestCRDNameLimitsAreTheGoFunctions(t *testing.T) {
	mpi, _ := BindingName(MPIProgramDerivedNames)
	master, _ := BindingName((&ChainerJob{}).DerivedNames())
	for _, tc := range []struct {
		plural string
		want   []string // parts of the rules, computed from the Go functions
	}{{
		plural: "chainerjobs",
		want: []string{
			fmt.Sprintf("self.metadata.name.size() <= %d", master.MaxJobName()),
			fmt.Sprintf("self.metadata.name.size() + %d]", len(master.Suffix)),
			fmt.Sprintf("more than %d'", master.Max),
			fmt.Sprintf("self.metadata.name.size() + k.size() <= %d", ChainerWorkerSetNameBudget),
			fmt.Sprintf("self.metadata.name.size() + %d + ", len(chainerWorkerSetInfix)),
			fmt.Sprintf("more than %d: %%s", MaxStatefulSetNameLength),
			fmt.Sprintf("StatefulSet \"%%s%s%%s\"", chainerWorkerSetInfix),
		},
	}, {
		plural: "pytorchjobs",
		want: []string{
			fmt.Sprintf("self.metadata.name.size() <= %d", PyTorchLastWorkerJob.MaxJobName()),
			fmt.Sprintf("self.metadata.name.size() + %d]", len(PyTorchLastWorkerJob.Suffix)),
			fmt.Sprintf("the %s \"%%s%s\"", PyTorchLastWorkerJob.What, PyTorchLastWorkerJob.Suffix),
			fmt.Sprintf("more than %d'", PyTorchLastWorkerJob.Max),
		},
	}, {
		plural: "mpijobs",
		want: []string{
			fmt.Sprintf("self.metadata.name.size() <= %d", mpi.MaxJobName()),
			fmt.Sprintf("self.metadata.name.size() + %d]", len(mpi.Suffix)),
			fmt.Sprintf("the %s \"%%s%s\"", mpi.What, mpi.Suffix),
			fmt.Sprintf("more than %d'", mpi.Max),
		},
	}, {
		plural: "horovodjobs",
		want: []string{
			fmt.Sprintf("self.metadata.name.size() <= %d", mpi.MaxJobName()),
			fmt.Sprintf("self.metadata.name.size() + %d]", len(mpi.Suffix)),
			fmt.Sprintf("the %s \"%%s%s\"", mpi.What, mpi.Suffix),
			fmt.Sprintf("more than %d'", mpi.Max),
		},
	}} {
		t.Run(tc.plural, func(t *testing.T) {
			rules := nameRules(t, tc.plural)
			if len(rules) == 0 {
				t.Fatal("the CRD has no rule on the length of metadata.name")
			}
			all := strings.Join(rules, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no rule contains %q, which the Go functions compute; the rules:\n%s", w, all)
				}
			}
			// Every number of these rules is one the Go functions compute (or an index 0).
			var allowed []int
			for _, w := range tc.want {
				allowed = append(allowed, numbers(w)...)
			}
			for _, i := range numbers(all) {
				if i != 0 && !slices.Contains(allowed, i) {
					t.Errorf("the CRD's name rules hold %d, which no Go function of names.go computes (they give %v)", i, allowed)
				}
			}
		})
	}
}

// number is an integer literal of a CEL rule (not part of a name such as DNS-1035).
var number = regexp.MustCompile(`(?:^|[^-\w])(\d+)\b`)

// numbers are the integer literals of s.
func numbers(s string) []int {
	var ns []int
	for _, m := range number.FindAllStringSubmatch(s, -1) {
		i, err := strconv.Atoi(m[1])
		if err != nil {
			panic(err)
		}
		ns = append(ns, i)
	}
	return ns
}
