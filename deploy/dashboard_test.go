package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const dashboardFile = "deploy/grafana/dashboards/sluice.json"

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// variable is a dashboard variable.
type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's, when collapsed
}

// loadDashboard decodes the dashboard strictly: unknown JSON is fine (it is
// Grafana's), broken JSON is not.
func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(inRoot(dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the panels, rows' panels included, rows themselves not.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" {
				out = append(out, p)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// grafanaMacros are the interval variables Grafana replaces before the
// query reaches Prometheus; the parser gets a duration in their place.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// query is a parsed PromQL expression and what it uses.
type query struct {
	expr      string
	metrics   []string // metric names selected
	selectors []*parser.VectorSelector
	jobs      []string  // values the job label is matched against
	quantiles []float64 // first arguments of histogram_quantile
}

// parseQuery parses one PromQL expression with Prometheus' own parser.
func parseQuery(t *testing.T, where, expr string) query {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaMacros.Replace(expr))
	if err != nil {
		t.Fatalf("%s: %q is not valid PromQL: %v", where, expr, err)
	}
	q := query{expr: expr}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				switch m.Name {
				case "__name__":
					name = m.Value
				case "job":
					q.jobs = append(q.jobs, m.Value)
				}
			}
			q.metrics = append(q.metrics, name)
			q.selectors = append(q.selectors, n)
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" {
				if lit, ok := n.Args[0].(*parser.NumberLiteral); ok {
					q.quantiles = append(q.quantiles, lit.Val)
				}
			}
		}
		return nil
	})
	if len(q.metrics) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	return q
}

// dashboardQueries parses every panel target and every variable query.
func dashboardQueries(t *testing.T, d dashboard) map[string][]query {
	t.Helper()
	byPanel := map[string][]query{}
	for _, p := range d.allPanels() {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			byPanel[p.Title] = append(byPanel[p.Title], parseQuery(t, "panel "+p.Title, tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: definition %q, want label_values(SELECTOR, LABEL)", v.Name, v.Definition)
			continue
		}
		byPanel["variable "+v.Name] = []query{parseQuery(t, "variable "+v.Name, m[1])}
	}
	return byPanel
}

// requiredPanels are the panels the dashboard must have: title, the
// metrics their queries must use, and the quantiles they must show.
var requiredPanels = []struct {
	title     string
	metrics   []string
	quantiles []float64
}{
	{"Provider rate against the cap", []string{"sluice_provider_latency_seconds_count", "sluice_pacer_rate"}, nil},
	{"Queue depth by lane", []string{"sluice_queue_depth"}, nil},
	{"Wait p50 / p99 by lane", []string{"sluice_wait_seconds_bucket"}, []float64{0.5, 0.99}},
	{"In flight", []string{"sluice_in_flight"}, nil},
	{"Retries", []string{"sluice_retries_total"}, nil},
	{"Dead letters", []string{"sluice_dead_letters_total"}, nil},
	{"Throttle events", []string{"sluice_throttle_events_total"}, nil},
	{"Pacer slot wait p50 / p99", []string{"sluice_pacer_slot_wait_seconds_bucket"}, []float64{0.5, 0.99}},
	{"Replicas up", []string{"up"}, nil},
}

func TestDashboardHasTheRequiredPanels(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("dashboard uid %q, title %q, schemaVersion %d: want all set", d.UID, d.Title, d.SchemaVersion)
	}
	queries := dashboardQueries(t, d)
	for _, want := range requiredPanels {
		qs, ok := queries[want.title]
		if !ok {
			t.Errorf("no panel %q", want.title)
			continue
		}
		var metrics []string
		var quantiles []float64
		for _, q := range qs {
			metrics = append(metrics, q.metrics...)
			quantiles = append(quantiles, q.quantiles...)
		}
		for _, m := range want.metrics {
			if !slices.Contains(metrics, m) {
				t.Errorf("panel %q queries %v, want %s among them", want.title, metrics, m)
			}
		}
		for _, q := range want.quantiles {
			if !slices.Contains(quantiles, q) {
				t.Errorf("panel %q shows quantiles %v, want %g", want.title, quantiles, q)
			}
		}
	}
}

func TestDashboardPanelsUseTheDatasourceVariableAndDoNotOverlap(t *testing.T) {
	d := loadDashboard(t)
	hasDS := slices.ContainsFunc(d.Templating.List, func(v variable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"`
	})
	if !hasDS {
		t.Error("no datasource variable of type prometheus: the dashboard would not import into another Grafana")
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.allPanels() {
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", p.Title, other, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("panel %q gridPos %+v is outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
	}
}

// alertRules are deploy/prometheus/alerts.yml's rules.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(inRoot("deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	rules := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("alerts.yml group %s: rule %+v lacks alert or expr", g.Name, r)
			}
			rules[r.Alert] = r.Expr
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

// usedSelector is a selector of the dashboard or the alerts, and where.
type usedSelector struct {
	where string
	sel   *parser.VectorSelector
}

// queriedSelectors returns every selector the dashboard's panels and
// variables and the alerts use.
func queriedSelectors(t *testing.T) []usedSelector {
	t.Helper()
	var used []usedSelector
	for where, qs := range dashboardQueries(t, loadDashboard(t)) {
		for _, q := range qs {
			for _, sel := range q.selectors {
				used = append(used, usedSelector{where, sel})
			}
		}
	}
	for name, expr := range alertRules(t) {
		for _, sel := range parseQuery(t, "alert "+name, expr).selectors {
			used = append(used, usedSelector{"alert " + name, sel})
		}
	}
	return used
}
