package testing

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// UserManifest is one job manifest a user brings, as an object to create.
type UserManifest struct {
	// Name says where it comes from: examples/<file>#<document>, kubeflow/<file>,
	// training-operator/<file> or seeds/<document>/<file>.
	Name   string
	Object map[string]any
}

// UserManifests finds, by glob under the repository root, every job manifest of a kind served
// says troupe serves: each document of examples/*.yaml, and kubeflow's published MPIJobs
// (test/manifests/kubeflow), training-operator's PyTorchJobs (test/manifests/training-operator)
// and the seed documents' jobs (test/manifests/seeds), those with only their apiVersion
// changed, as a user moving to troupe would. It fails when a folder holds none, so a moved
// folder cannot pass by finding nothing.
func UserManifests(root string, served func(kind string) bool) ([]UserManifest, error) {
	var out []UserManifest
	examples, _ := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	for _, f := range examples {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if obj != nil && served(fmt.Sprint(obj["kind"])) {
				out = append(out, UserManifest{Name: fmt.Sprintf("examples/%s#%d", filepath.Base(f), i+1), Object: obj})
			}
		}
	}
	manifests := filepath.Join(root, "test", "manifests")
	kubeflow, _ := filepath.Glob(filepath.Join(manifests, "kubeflow", "*.yaml"))
	trainingOperator, _ := filepath.Glob(filepath.Join(manifests, "training-operator", "*.yaml"))
	seeds, _ := filepath.Glob(filepath.Join(manifests, "seeds", "*", "*.yaml"))
	for _, f := range slices.Concat(kubeflow, trainingOperator, seeds) {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if !served(fmt.Sprint(obj["kind"])) {
			continue
		}
		obj["apiVersion"] = troupev1.GroupVersion.String()
		name, _ := filepath.Rel(manifests, f)
		out = append(out, UserManifest{Name: name, Object: obj})
	}
	if len(examples) == 0 || len(kubeflow) == 0 || len(trainingOperator) == 0 || len(seeds) == 0 {
		return nil, fmt.Errorf("found %d example files, %d kubeflow MPIJobs, %d training-operator manifests and %d seed manifests under %s",
			len(examples), len(kubeflow), len(trainingOperator), len(seeds), root)
	}
	return out, nil
}
