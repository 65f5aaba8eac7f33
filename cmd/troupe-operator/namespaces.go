package main

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// namespaceList is the value of --watch-namespaces: distinct, valid namespace names.
type namespaceList []string

func (l *namespaceList) String() string { return strings.Join(*l, ",") }

// Set parses a comma-separated list; empty entries are ignored, so "" means every namespace.
func (l *namespaceList) Set(v string) error {
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" || slices.Contains(names, n) {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", n, strings.Join(errs, "; "))
		}
		names = append(names, n)
	}
	*l = names
	return nil
}
