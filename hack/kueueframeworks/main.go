// Command kueueframeworks writes, in place, the externalFrameworks list of a Kueue
// Configuration from troupe's kinds registry:
//
//	go run ./hack/kueueframeworks hack/controlplane/kueue-config.yaml
//
// Kueue must know every kind troupe serves as an external framework (docs/kueue.md), so the
// list is generated rather than kept by hand beside the registry: make manifests runs this,
// and make verify fails when the committed file is stale (TestKueueConfigNamesEveryKind holds
// the file to the registry too). Only the list's entries are rewritten; comments, order and
// everything else of the file stay as written.
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kueueframeworks <kueue-config.yaml>")
		os.Exit(2)
	}
	if err := writeFile(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "kueueframeworks: %v\n", err)
		os.Exit(1)
	}
}

func writeFile(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := withFrameworks(in, frameworks())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(in, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// frameworks are the external framework names of every registered kind: Kind.version.group.
func frameworks() []string {
	var names []string
	for _, k := range kinds.All() {
		names = append(names, k.Name+"."+troupev1.GroupVersion.Version+"."+troupev1.GroupVersion.Group)
	}
	return names
}

// listKey finds the externalFrameworks key (its indentation in group 1) and the entries that
// follow it, each "<indentation>- <name>" on its own line.
var listKey = regexp.MustCompile(`(?m)^( *)externalFrameworks:\n((?:[ ]*- .*\n)*)`)

// withFrameworks is config with the entries of its externalFrameworks list replaced by names.
func withFrameworks(config []byte, names []string) ([]byte, error) {
	loc := listKey.FindSubmatchIndex(config)
	if loc == nil {
		return nil, fmt.Errorf("no externalFrameworks list")
	}
	indent := string(config[loc[2]:loc[3]])
	var list bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&list, "%s- %s\n", indent, n)
	}
	return bytes.Join([][]byte{config[:loc[4]], list.Bytes(), config[loc[5]:]}, nil), nil
}
