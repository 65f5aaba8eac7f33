// Package doccommands reads the install, upgrade and uninstall commands out of troupe's
// documentation, so that the real-node tests run them as the docs write them, and a unit test
// refuses a command in the docs that no real-node test runs.
package doccommands

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Sources are the documents whose commands are collected, relative to the repository's root
// (globs allowed).
var Sources = []string{
	"README.md",
	"docs/*.md",
	"charts/troupe/README.md",
	"charts/troupe/templates/NOTES.txt",
	"CHANGELOG.md",
}

// Command is one command of the docs, as a user would type it: continuation lines joined and
// a trailing comment dropped.
type Command struct {
	File string // relative to the repository's root
	Line int    // where the command starts
	Text string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Text) }

// Extract returns every install, upgrade or uninstall command of the Sources under root, in
// file and line order: from the Markdown files' code blocks and inline code spans, and from
// the lines of NOTES.txt.
func Extract(root string) ([]Command, error) {
	var files []string
	for _, s := range Sources {
		m, err := filepath.Glob(filepath.Join(root, s))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("no document %s under %s", s, root)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var cmds []Command
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		var found []Command
		if strings.HasSuffix(rel, ".md") {
			found = fromMarkdown(string(data))
		} else {
			// The chart's notes as helm prints them for the docs' install into troupe-system.
			notes := strings.ReplaceAll(string(data), "{{ .Release.Namespace }}", "troupe-system")
			found = fromLines(strings.Split(notes, "\n"), 1)
		}
		for _, c := range found {
			if IsInstallCommand(c.Text) {
				c.File = rel
				cmds = append(cmds, c)
			}
		}
	}
	return cmds, nil
}

// fromMarkdown returns the candidate commands of a Markdown document: each line of a fenced
// code block, and each inline code span of the prose and tables (a span may wrap onto the next
// line of its paragraph).
func fromMarkdown(doc string) []Command {
	lines := strings.Split(doc, "\n")
	var cmds []Command
	var prose []string // the prose lines since the last fence, blank for lines of a block
	proseStart := 1
	flushProse := func() {
		cmds = append(cmds, spans(prose, proseStart)...)
		prose = nil
	}
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			if prose == nil {
				proseStart = i + 1
			}
			prose = append(prose, lines[i])
			continue
		}
		flushProse()
		start := i + 1
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
		}
		cmds = append(cmds, fromLines(lines[start:min(i, len(lines))], start+1)...)
	}
	flushProse()
	return cmds
}

// fromLines returns the commands of shell lines (first is the number of lines[0]): a line
// ending with a backslash continues on the next, and a comment ends the command.
func fromLines(lines []string, first int) []Command {
	var cmds []Command
	for i := 0; i < len(lines); i++ {
		start := i
		text := stripComment(lines[i])
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + stripComment(lines[i])
		}
		if text = strings.Join(strings.Fields(text), " "); text != "" {
			cmds = append(cmds, Command{Line: first + start, Text: text})
		}
	}
	return cmds
}

// stripComment drops a shell comment: from a # that starts a word to the end of the line.
func stripComment(line string) string {
	for i, r := range line {
		if r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return strings.TrimRight(line[:i], " \t")
		}
	}
	return strings.TrimRight(line, " \t")
}

// codeSpan is an inline code span; it does not cross a blank line (a paragraph's end).
var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans returns the inline code spans of prose lines, the first being line number first.
func spans(lines []string, first int) []Command {
	var cmds []Command
	// Paragraphs: runs of non-blank lines, each searched as one text.
	for i := 0; i < len(lines); {
		if strings.TrimSpace(lines[i]) == "" {
			i++
			continue
		}
		j := i
		for j < len(lines) && strings.TrimSpace(lines[j]) != "" {
			j++
		}
		para := strings.Join(lines[i:j], "\n")
		for _, m := range codeSpan.FindAllStringSubmatchIndex(para, -1) {
			line := first + i + strings.Count(para[:m[0]], "\n")
			cmds = append(cmds, Command{Line: line, Text: strings.Join(strings.Fields(para[m[2]:m[3]]), " ")})
		}
		i = j
	}
	return cmds
}

// installFile matches an argument that names one of troupe's install files or directories, in
// a checkout or a release. config/monitoring/ is not one: it adds a ServiceMonitor for a
// Prometheus Operator to an install, and its commands are not collected.
var installFile = regexp.MustCompile(`^(config(/(crds|namespaced))?/?|deploy(/.*)?|charts/troupe(/crds)?/?|troupe(-crds|-namespaced)?\.yaml|troupe-\S+\.tgz)$`)

// troupeNamespace matches the namespaces the install commands make or delete.
var troupeNamespace = regexp.MustCompile(`^troupe-(system|jobs)$`)

// IsInstallCommand says whether a command (or a code span) installs, upgrades or uninstalls
// troupe: kubectl apply, create or delete of troupe's install files, kubectl create, label or
// delete of its namespaces, kubectl delete of its CRDs, helm install, upgrade or uninstall of a
// release, or a pipeline from kubectl get that opts namespaces in (labels them
// troupe.dev/jobs=enabled). A bare mention (`helm upgrade`, `kubectl delete`) names nothing to
// run and is not one, nor is the label of one namespace named by the reader.
func IsInstallCommand(text string) bool {
	f := strings.Fields(text)
	if len(f) < 3 {
		return false
	}
	if f[0] == "kubectl" && f[1] == "get" && strings.Contains(text, "|") && strings.Contains(text, "troupe.dev/jobs=enabled") {
		return true
	}
	switch f[0] {
	case "helm":
		switch f[1] {
		case "install", "upgrade":
			return len(positional(f[2:])) >= 2
		case "uninstall":
			return len(positional(f[2:])) >= 1
		}
	case "kubectl":
		switch f[1] {
		case "apply", "create", "delete":
			for i, a := range f[2:] {
				if (a == "-f" || a == "-k") && i+3 < len(f) && installFile.MatchString(f[i+3]) {
					return true
				}
			}
			if f[2] == "namespace" && len(f) > 3 && troupeNamespace.MatchString(f[3]) {
				return true
			}
			return f[1] == "delete" && f[2] == "crd" && len(f) > 3 && strings.HasSuffix(f[3], ".troupe.dev")
		case "label":
			return f[2] == "namespace" && len(f) > 3 && troupeNamespace.MatchString(f[3])
		}
	}
	return false
}

// positional is the arguments of a helm command that are not flags or their values.
func positional(args []string) []string {
	var p []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-n" || a == "--namespace" || a == "--set" || a == "-f" || a == "--values" || a == "--timeout":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			p = append(p, a)
		}
	}
	return p
}
