// Command celcost prints the cost the API server estimates for every CEL rule of the given CRD
// manifests, and the errors it would refuse them with, using the API server's own CRD
// validation (k8s.io/apiextensions-apiserver). A rule may cost at most 10 million units, times
// the number of times it can run (once per map entry or list item above it); the rules and
// message expressions of one CRD at most 100 million together. docs/admission.md explains
// which rules stay in the webhook because of these limits.
//
//	cd test/tools/celcost && go run . ../../../config/crds/*.yaml
package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	v1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

func main() {
	failed := false
	for _, f := range os.Args[1:] {
		crd, err := load(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(f)
		var total uint64
		// The internal form keeps a schema shared by every version in spec.validation.
		if v := crd.Spec.Validation; v != nil {
			total += walk("", v.OpenAPIV3Schema, validation.RootCELContext(v.OpenAPIV3Schema))
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil {
				total += walk("", v.Schema.OpenAPIV3Schema, validation.RootCELContext(v.Schema.OpenAPIV3Schema))
			}
		}
		fmt.Printf("  %12d  total (limit %d)\n", total, validation.StaticEstimatedCRDCostLimit)
		for _, e := range validation.ValidateCustomResourceDefinition(context.Background(), crd) {
			failed = true
			fmt.Println("  refused:", e.Error())
		}
	}
	if failed {
		os.Exit(1)
	}
}

func load(file string) (*apiext.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var crd v1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	v1.SetObjectDefaults_CustomResourceDefinition(&crd)
	var internal apiext.CustomResourceDefinition
	if err := v1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &internal, nil
}

var envSet = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

// walk prints the estimated cost of each rule at and under s, as the API server counts it
// (times the rule's cardinality), with its message expression's, and returns their sum.
func walk(path string, s *apiext.JSONSchemaProps, ctx *validation.CELSchemaContext) uint64 {
	var total uint64
	if len(s.XValidations) > 0 {
		info, err := ctx.TypeInfo()
		if err != nil || info == nil {
			fmt.Printf("  %s: no type information: %v\n", path, err)
			return 0
		}
		results, err := cel.Compile(info.Schema, info.DeclType, celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
		if err != nil {
			fmt.Printf("  %s: %v\n", path, err)
			return 0
		}
		for i, r := range results {
			cardinality := r.MaxCardinality
			if ctx.MaxCardinality != nil {
				cardinality = *ctx.MaxCardinality
			}
			cost := r.MaxCost * cardinality
			total += cost + r.MessageExpressionMaxCost
			fmt.Printf("  %12d  %s[%d] (%d x %d; message %d)\n", cost+r.MessageExpressionMaxCost, orRoot(path), i, r.MaxCost, cardinality, r.MessageExpressionMaxCost)
		}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		total += walk(path+"."+n, &p, ctx.ChildPropertyContext(&p, n))
	}
	if s.Items != nil && s.Items.Schema != nil {
		total += walk(path+"[*]", s.Items.Schema, ctx.ChildItemsContext(s.Items.Schema))
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		total += walk(path+"[<key>]", s.AdditionalProperties.Schema, ctx.ChildAdditionalPropertiesContext(s.AdditionalProperties.Schema))
	}
	return total
}

func orRoot(path string) string {
	if path == "" {
		return "<root>"
	}
	return path
}
