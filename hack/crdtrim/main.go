// Command crdtrim fits the pod templates a CRD embeds to their use, in place:
//
//	go run ./hack/crdtrim config/crds/*.yaml
//
// Each embedded corev1.PodTemplateSpec brings the whole pod schema with Kubernetes' own
// descriptions, about 240 kB of the 300 kB it weighs as compact JSON. The MPIJob CRD embeds
// several (one per form's launcher and worker), and a CRD is one object in etcd, whose request
// limit is 1.5 MiB. The descriptions of pod fields are Kubernetes' (`kubectl explain
// pod.spec.containers` prints them), so the CRD keeps its own fields' descriptions, the
// template's own included, and drops only those below a template. make manifests runs it after
// controller-gen; TestCRDSizes holds the result under its bound.
//
// It also lets the optional lists and objects of a pod template be null, as the API server
// lets them be in a Pod: published manifests write "command:" with no value (kubeflow's
// pi-mpich.yaml), which kubectl create drops but a server-side apply sends as null, refused by
// a schema that is not nullable (TestKubectlFlowsOverEveryManifest).
package main

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := trimFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdtrim: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func trimFile(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return err
	}
	trimTemplates(&doc)
	var out bytes.Buffer
	out.WriteString("---\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// trimTemplates walks the YAML tree; below each schema of a pod template it drops every
// description.
func trimTemplates(n *yaml.Node) {
	if n.Kind == yaml.MappingNode && isPodTemplateSchema(n) {
		if props := value(n, "properties"); props != nil {
			dropDescriptions(props)
			allowNull(n)
			flowSmallNodes(props)
		}
		return
	}
	for _, c := range n.Content {
		trimTemplates(c)
	}
}

// isPodTemplateSchema says whether a schema is a pod template's: an object whose properties are
// metadata and a spec that has containers.
func isPodTemplateSchema(n *yaml.Node) bool {
	props := value(n, "properties")
	if props == nil || value(props, "metadata") == nil {
		return false
	}
	spec := value(props, "spec")
	if spec == nil {
		return false
	}
	specProps := value(spec, "properties")
	return specProps != nil && value(specProps, "containers") != nil
}

// dropDescriptions removes every description key of the schemas below n. A mapping key named
// "description" under "properties" is a field called description, not a schema's text, and stays.
func dropDescriptions(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			dropDescriptions(c)
		}
		return
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "description" && v.Kind == yaml.ScalarNode {
			continue
		}
		dropDescriptions(v)
		kept = append(kept, k, v)
	}
	n.Content = kept
}

// allowNull marks every optional property below the object schema n whose type is array or
// object nullable. Required ones (a pod's containers) stay as they are.
func allowNull(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	if props := value(n, "properties"); props != nil && props.Kind == yaml.MappingNode {
		required := map[string]bool{}
		if req := value(n, "required"); req != nil {
			for _, r := range req.Content {
				required[r.Value] = true
			}
		}
		for i := 0; i+1 < len(props.Content); i += 2 {
			name, schema := props.Content[i].Value, props.Content[i+1]
			if t := value(schema, "type"); t != nil && (t.Value == "array" || t.Value == "object") && !required[name] {
				setNullable(schema)
			}
			allowNull(schema)
		}
	}
	if items := value(n, "items"); items != nil {
		allowNull(items)
	}
	if extra := value(n, "additionalProperties"); extra != nil {
		allowNull(extra)
	}
}

// setNullable adds nullable: true to a schema that does not say.
func setNullable(schema *yaml.Node) {
	if value(schema, "nullable") != nil {
		return
	}
	schema.Content = append(schema.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "nullable"},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
}

// value is the value of key in the mapping n, or nil.
func value(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// flowSmallNodes writes the small schemas below a pod template on one line each
// ("containerPort: {format: int32, type: integer}"): a pod schema nests 20 levels deep, so in
// block style its indentation alone is most of the file, and the MPIJob CRD, with a template per
// form's launcher and worker, would weigh 1.5 MB. It reports whether n is small enough for a line
// of its own: a scalar, or a mapping or list of at most flowMaxNodes small nodes.
func flowSmallNodes(n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode {
		return true
	}
	small := true
	for _, c := range n.Content {
		if !flowSmallNodes(c) {
			small = false
		}
	}
	if small && countNodes(n) <= flowMaxNodes {
		n.Style = yaml.FlowStyle
		return true
	}
	return false
}

// flowMaxNodes bounds a one-line schema: a property with its type, format and a short enum fits,
// a whole object of properties does not.
const flowMaxNodes = 32

// countNodes is the number of nodes in the tree under n, n included.
func countNodes(n *yaml.Node) int {
	count := 1
	for _, c := range n.Content {
		count += countNodes(c)
	}
	return count
}
