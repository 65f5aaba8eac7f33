// Command kueueframeworks writes, in place, the externalFrameworks lists of a Kueue
// Configuration (integrations' and MultiKueue's) from troupe's kinds registry:
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
	"strings"

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

// listKey finds each externalFrameworks key (its indentation in group 1) and the entries that
// follow it, each "<indentation>- <entry>" on its own line.
var listKey = regexp.MustCompile(`(?m)^( *)externalFrameworks:\n((?:[ ]*- .*\n)*)`)

// nameForm is the entry form of MultiKueue's list (multiKueue.externalFrameworks), an object
// per kind, where integrations.externalFrameworks has plain names.
const nameForm = "name: "

// withFrameworks is config with the entries of each of its externalFrameworks lists replaced
// by names: integrations.externalFrameworks (Kueue knows the kinds) and, when the file has it,
// multiKueue.externalFrameworks (MultiKueue dispatches them). A list whose first entry is
// "- name: X" gets its entries in that form.
func withFrameworks(config []byte, names []string) ([]byte, error) {
	locs := listKey.FindAllSubmatchIndex(config, -1)
	if locs == nil {
		return nil, fmt.Errorf("no externalFrameworks list")
	}
	var out bytes.Buffer
	last := 0
	for _, loc := range locs {
		indent := string(config[loc[2]:loc[3]])
		entries := string(config[loc[4]:loc[5]])
		prefix := ""
		if strings.HasPrefix(strings.TrimLeft(entries, " "), "- "+nameForm) {
			prefix = nameForm
		}
		out.Write(config[last:loc[4]])
		for _, n := range names {
			fmt.Fprintf(&out, "%s- %s%s\n", indent, prefix, n)
		}
		last = loc[5]
	}
	out.Write(config[last:])
	return out.Bytes(), nil
}
