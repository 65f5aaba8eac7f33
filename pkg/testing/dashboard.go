package testing

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DashboardQuery is one PromQL query of a Grafana dashboard and where it is.
type DashboardQuery struct {
	Where string
	Expr  string
}

// grafanaDashboard is what DashboardQueries reads of a dashboard's JSON model.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"` // a collapsed row's panels
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// DashboardQueries returns every PromQL query of a Grafana dashboard: its panels' targets
// (rows' panels included) and its query variables (label_values(...) and the like).
func DashboardQueries(data []byte) ([]DashboardQuery, error) {
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var out []DashboardQuery
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, DashboardQuery{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// The query is a string (older dashboards) or an object with a query field.
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("variable %s: query: %w", v.Name, err)
			}
			q = obj.Query
		}
		out = append(out, DashboardQuery{Where: "variable " + v.Name, Expr: q})
	}
	return out, nil
}

var (
	promString    = regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'|` + "`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promLabelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues   = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*(,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*)?\)\s*$`)
)

// promKeywords are the words of PromQL that are neither functions nor metric names.
var promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "Inf", "NaN"}

// MetricNames returns the metric names a PromQL expression selects, in order, each once. It
// also reads Grafana's label_values(metric{...}, label). It is a reader for the dashboards'
// queries, not a parser: matchers, ranges, strings and label lists are dropped, and what is
// left is names of functions (followed by a parenthesis), keywords and metrics.
func MetricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRanges.ReplaceAllString(expr, " ")
	expr = promLabelList.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && (expr[loc[0]-1] == '$' || expr[loc[0]-1] == '.' || isDigit(expr[loc[0]-1])) {
			continue // a Grafana variable, or the tail of a number such as 1e3
		}
		if strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "(") || slices.Contains(promKeywords, name) {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
