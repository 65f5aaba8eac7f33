package testing

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// AdmissionCase is one spec of the admission corpus (test/testdata/admission/bad): a manifest
// whose header comments say why it is bad, what the refusal must contain (the field path, and
// the reason where it matters), and which layer refuses it: "crd" when the CRD alone (OpenAPI
// bounds and CEL rules) does, with or without the webhook; "webhook" when only the validating
// webhook does, and the CRD admits it.
//
//	# <why>.
//	# expect: <text the API server's error must contain>
//	# refused-by: crd|webhook
type AdmissionCase struct {
	Name      string
	Why       string
	Expect    string
	RefusedBy Layer
	Object    *unstructured.Unstructured
}

// Layer is the part of the API server that refuses a bad spec.
type Layer string

const (
	// LayerCRD is the CRD's schema: OpenAPI bounds and CEL rules, checked by the API server.
	LayerCRD Layer = "crd"
	// LayerWebhook is the validating admission webhook.
	LayerWebhook Layer = "webhook"
)

// LoadAdmissionCases reads every case of dir, sorted by name.
func LoadAdmissionCases(dir string) ([]AdmissionCase, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var cases []AdmissionCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		c := AdmissionCase{Name: strings.TrimSuffix(filepath.Base(f), ".yaml"), Object: &unstructured.Unstructured{}}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "# ")
			if !ok {
				break
			}
			switch {
			case strings.HasPrefix(line, "expect: "):
				c.Expect = strings.TrimPrefix(line, "expect: ")
			case strings.HasPrefix(line, "refused-by: "):
				c.RefusedBy = Layer(strings.TrimPrefix(line, "refused-by: "))
			default:
				c.Why = line
			}
		}
		if c.Expect == "" || (c.RefusedBy != LayerCRD && c.RefusedBy != LayerWebhook) {
			return nil, fmt.Errorf("%s: the header must have \"# expect: <text>\" and \"# refused-by: crd|webhook\"", f)
		}
		if err := yaml.Unmarshal(data, &c.Object.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		cases = append(cases, c)
	}
	return cases, nil
}
