package testing

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// AdmissionCase is one spec of the admission corpus (test/testdata/admission/bad): a manifest
// whose header comments say why it is bad, what the refusal must name, and whether the CRD
// alone (OpenAPI bounds and CEL rules) refuses it when no webhook is registered.
//
//	# <why>.
//	# expect: <text the API server's error must contain, usually the field path>
//	# refused-without-webhook: yes|no
type AdmissionCase struct {
	Name                  string
	Why                   string
	Expect                string
	RefusedWithoutWebhook bool
	Object                *unstructured.Unstructured
}

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
			case strings.HasPrefix(line, "refused-without-webhook: "):
				c.RefusedWithoutWebhook = strings.TrimPrefix(line, "refused-without-webhook: ") == "yes"
			default:
				c.Why = line
			}
		}
		if err := yaml.Unmarshal(data, &c.Object.Object); err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}
