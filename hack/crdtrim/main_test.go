package main

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A pod template's small schemas are written on one line each, and the CRD reads back as the
// same object: only the layout changes (and the descriptions below the template go).
func TestTrimKeepsTheSchema(t *testing.T) {
	in := `
properties:
  template:
    properties:
      metadata: {type: object}
      spec:
        properties:
          containers:
            items:
              properties:
                ports:
                  items:
                    properties:
                      containerPort:
                        description: the port
                        format: int32
                        type: integer
                    required: [containerPort]
                    type: object
                  type: array
              type: object
            type: array
        required: [containers]
        type: object
    type: object
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	trimTemplates(&doc)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "containerPort: {format: int32, type: integer}") {
		t.Errorf("a small schema is not on one line:\n%s", out)
	}
	var before, after map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(in, "                        description: the port\n", "")), &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	ports := after["properties"].(map[string]any)["template"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["containers"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["ports"].(map[string]any)
	if ports["nullable"] != true {
		t.Errorf("an optional list of a pod template is not nullable: %v", ports)
	}
	dropNullable(after)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the schema changed:\nbefore %v\nafter  %v", before, after)
	}
}

// dropNullable removes every nullable key below v: what allowNull adds.
func dropNullable(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "nullable")
		for _, e := range x {
			dropNullable(e)
		}
	case []any:
		for _, e := range x {
			dropNullable(e)
		}
	}
}
