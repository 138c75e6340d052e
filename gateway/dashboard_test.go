package gateway_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
)

// rateUnits are Grafana units that read a value as a per-second rate.
var rateUnits = []string{"ops", "reqps", "rps", "wps", "iops", "cps", "Bps", "bps"}

// Every panel's queries read each series as its type allows: rate() and
// increase() over counters and histogram parts only, histogram_quantile()
// over _bucket series; and a panel's unit says per second only when its
// queries are rates (a gauge charted in ops/s reads as a throughput).
func TestDashboardPanelsReadSeriesByType(t *testing.T) {
	raw, err := os.ReadFile("../configs/grafana/dashboards/iop.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Title       string `json:"title"`
			Type        string `json:"type"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, cm := range contractMetrics {
		types[cm.name] = cm.typ
		if cm.typ == histogram {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				types[cm.name+suf] = counter
			}
		}
	}
	p := parser.NewParser(parser.Options{})
	for _, panel := range doc.Panels {
		if panel.Type == "row" {
			continue
		}
		rates := 0
		for _, tg := range panel.Targets {
			expr, err := p.ParseExpr(grafanaVars.Replace(tg.Expr))
			if err != nil {
				t.Errorf("%s: %v", panel.Title, err)
				continue
			}
			isRate := false
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				call, ok := n.(*parser.Call)
				if !ok {
					return nil
				}
				switch call.Func.Name {
				case "rate", "irate", "increase":
					isRate = isRate || call.Func.Name != "increase"
					parser.Inspect(call, func(n parser.Node, _ []parser.Node) error {
						if vs, ok := n.(*parser.VectorSelector); ok && types[vs.Name] != counter {
							t.Errorf("%s: %s() over %s, which is not a counter:\n%s", panel.Title, call.Func.Name, vs.Name, tg.Expr)
						}
						return nil
					})
				case "histogram_quantile":
					parser.Inspect(call, func(n parser.Node, _ []parser.Node) error {
						if vs, ok := n.(*parser.VectorSelector); ok && !strings.HasSuffix(vs.Name, "_bucket") {
							t.Errorf("%s: histogram_quantile over %s, not a _bucket series:\n%s", panel.Title, vs.Name, tg.Expr)
						}
						return nil
					})
				}
				return nil
			})
			if isRate {
				rates++
			}
		}
		unit := panel.FieldConfig.Defaults.Unit
		perSecond := slices.Contains(rateUnits, unit)
		if perSecond && rates != len(panel.Targets) {
			t.Errorf("%s: unit %q (per second), but %d of its %d queries are not rates", panel.Title, unit, len(panel.Targets)-rates, len(panel.Targets))
		}
	}
}
