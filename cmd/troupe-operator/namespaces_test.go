package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestWatchNamespacesFlag(t *testing.T) {
	cases := []struct {
		arg     string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"team-a", []string{"team-a"}, ""},
		{" team-a, team-b,,team-a ", []string{"team-a", "team-b"}, ""},
		{"team-a,Team_B", nil, `invalid value "team-a,Team_B" for flag -watch-namespaces: namespace "Team_B": a lowercase RFC 1123 label`},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var got namespaceList
		fs.Var(&got, "watch-namespaces", "")
		err := fs.Parse([]string{"--watch-namespaces=" + tc.arg})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.arg, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.arg, err)
		case !slices.Equal(got, tc.want):
			t.Errorf("%q: namespaces %q, want %q", tc.arg, got, tc.want)
		}
	}
}
