// Command vulncheck reads govulncheck's JSON stream (-format json) on stdin and fails when the
// code calls a vulnerable function whose OSV ID the accepted list (the file named by the first
// argument) does not hold. Findings in code that is imported but not called are counted, not
// failed on, as govulncheck's own text report does.
//
// The accepted list holds one ID per line, then why it is accepted; # starts a comment.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// message is the part of one govulncheck JSON message read here.
type message struct {
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: govulncheck -format json ./... | vulncheck ACCEPTED-LIST")
		os.Exit(2)
	}
	accepted, err := readAccepted(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	called, imported := map[string]string{}, map[string]bool{}
	dec := json.NewDecoder(os.Stdin)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "vulncheck: reading govulncheck's output:", err)
			os.Exit(2)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 {
			continue
		}
		if f.Trace[0].Function == "" {
			imported[f.OSV] = true
			continue
		}
		t := f.Trace[0]
		called[f.OSV] = fmt.Sprintf("%s@%s (package %s), fixed in %s", t.Module, t.Version, t.Package, f.FixedVersion)
	}
	var failed []string
	for _, id := range slices.Sorted(maps.Keys(called)) {
		if why, ok := accepted[id]; ok {
			fmt.Printf("accepted %s: %s; %s\n", id, called[id], why)
			continue
		}
		failed = append(failed, fmt.Sprintf("%s: %s", id, called[id]))
	}
	for id := range called {
		delete(imported, id)
	}
	fmt.Printf("govulncheck: %d vulnerabilities in called code (%d accepted), %d more in imported code that is not called\n",
		len(called), len(called)-len(failed), len(imported))
	if len(failed) > 0 {
		fmt.Println("called and not accepted (upgrade the module, or list the ID in " + os.Args[1] + " with the reason):")
		for _, f := range failed {
			fmt.Println("  " + f)
		}
		os.Exit(1)
	}
}

// readAccepted reads the accepted list: ID -> why.
func readAccepted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, " ")
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s: %s has no reason", path, id)
		}
		out[id] = strings.TrimSpace(why)
	}
	return out, sc.Err()
}
