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
// says troupe serves: each document of examples/*.yaml, and the published manifests of each
// folder of test/manifests (kubeflow's MPIJobs, training-operator's PyTorchJobs, the seed
// documents' jobs in a folder per document; a new source is a new folder), those with only
// their apiVersion changed, as a user moving to troupe would. It fails when a folder holds
// none, so an emptied folder cannot pass by finding nothing.
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
	// Each folder of test/manifests is one source: its files, or those of its folders (the
	// seed documents').
	sources, _ := filepath.Glob(filepath.Join(manifests, "*"))
	var files []string
	for _, dir := range sources {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		flat, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		nested, _ := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
		if len(flat)+len(nested) == 0 {
			return nil, fmt.Errorf("%s holds no manifest", dir)
		}
		files = append(files, slices.Concat(flat, nested)...)
	}
	for _, f := range files {
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
	if len(examples) == 0 || len(sources) == 0 {
		return nil, fmt.Errorf("found %d example files and %d manifest folders under %s", len(examples), len(sources), root)
	}
	return out, nil
}
