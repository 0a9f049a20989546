package main

import (
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func checkAlerts(r *report, gw *gateway, file string) {
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Prometheus's own parser, as `promtool check rules` uses it: strict YAML (unknown fields
	// fail), valid durations, label names and templates, and every expr parsed as PromQL.
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
	for _, err := range errs {
		r.fail("rulefmt: %v", err)
	}
	if len(errs) > 0 || groups == nil {
		return
	}
	r.ok("%s: rulefmt parse (%d groups)", file, len(groups.Groups))
	r.check(len(groups.Groups) > 0, "%s: has rule groups", file)
	for _, g := range groups.Groups {
		for _, rule := range g.Rules {
			name := rule.Alert
			if name == "" {
				name = rule.Record
			}
			where := g.Name + "/" + name
			if rule.Alert != "" {
				r.check(rule.Labels["severity"] != "", "%s: has a severity label", where)
				r.check(rule.Annotations["summary"] != "", "%s: has a summary annotation", where)
			}
			expr, err := p.ParseExpr(rule.Expr)
			if err != nil {
				r.fail("%s: expr: %v", where, err)
				continue
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok || !strings.HasPrefix(vs.Name, "nimbus_") {
					return nil
				}
				if m, ok := checkMetricName(r, gw, where, vs.Name); ok {
					for _, lm := range vs.LabelMatchers {
						if lm.Name != "__name__" {
							checkMetricLabel(r, where, m, vs.Name, lm.Name)
						}
					}
				}
				return nil
			})
		}
	}
}

// checkMetricName: the series must be one the gateway exports. Its histograms are rendered
// as summaries (metrics-exporter-prometheus without buckets): NAME{quantile=...}, NAME_sum,
// NAME_count, never NAME_bucket. Returns the metric the series belongs to.
func checkMetricName(r *report, gw *gateway, where, name string) (describeMetric, bool) {
	if m, ok := gw.metrics[name]; ok {
		r.ok("%s: metric %s is exported by the gateway", where, name)
		return m, true
	}
	for _, suf := range []string{"_sum", "_count"} {
		if m, ok := gw.metrics[strings.TrimSuffix(name, suf)]; ok && strings.HasSuffix(name, suf) && m.Kind == "histogram" {
			r.ok("%s: metric %s is exported by the gateway", where, name)
			return m, true
		}
	}
	if m, ok := gw.metrics[strings.TrimSuffix(name, "_bucket")]; ok && strings.HasSuffix(name, "_bucket") && m.Kind == "histogram" {
		r.fail("%s: %s does not exist: the gateway exports %s as a summary (use {quantile=\"0.99\"})", where, name, m.Name)
		return m, false
	}
	r.fail("%s: metric %s is exported by the gateway", where, name)
	return describeMetric{}, false
}

// checkMetricLabel: a label matcher names a label the series has: one the gateway gives the
// metric, `quantile` on a summary's quantile series, or one Prometheus adds when scraping.
func checkMetricLabel(r *report, where string, m describeMetric, series, label string) {
	ok := label == "instance" || label == "job" || contains(m.Labels, label) ||
		label == "quantile" && m.Kind == "histogram" && series == m.Name
	r.check(ok, "%s: %s has the label %s (it has %v)", where, series, label, m.Labels)
}
