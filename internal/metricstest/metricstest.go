// Package metricstest reads a Prometheus text exposition (a /metrics
// answer) in tests, as Prometheus parses it.
package metricstest

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses body, failing the test when it does not parse.
func Parse(t testing.TB, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// Value returns the value of the first sample of family name whose labels
// include want, and whether there is one. Histograms give their count.
func Value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, m := range matching(fams, name, want) {
		return value(m), true
	}
	return 0, false
}

// Sum sums the samples of family name whose labels include want.
func Sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := 0.0
	for _, m := range matching(fams, name, want) {
		sum += value(m)
	}
	return sum
}

// matching lists the samples of family name whose labels include want.
func matching(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	fam := fams[name]
	if fam == nil {
		return nil
	}
	var out []*dto.Metric
next:
	for _, m := range fam.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
