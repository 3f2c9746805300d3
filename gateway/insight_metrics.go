package gateway

import (
	"github.com/directgate/directgate/querystats"
	"github.com/prometheus/client_golang/prometheus"
)

// metricsTopN is how many digests the metrics show: the top by total
// time, never one series per fingerprint.
const metricsTopN = 10

var (
	digestTimeDesc = prometheus.NewDesc("directgate_query_digest_time_seconds_total",
		"Total time of the top statement digests by total time (at most 10 series).",
		[]string{"rank", "fingerprint", "user", "database", "cluster"}, nil)
	digestCountDesc = prometheus.NewDesc("directgate_query_digest_statements_total",
		"Executions of the top statement digests by total time (at most 10 series).",
		[]string{"rank", "fingerprint", "user", "database", "cluster"}, nil)
	digestEvictedDesc = prometheus.NewDesc("directgate_query_digests_evicted_total",
		"Digests evicted to keep query_stats.max_digests.", nil, nil)
	ruleHitsDesc = prometheus.NewDesc("directgate_query_rule_hits_total",
		"Statements each query rule took (dry_run: the ones it would have).", []string{"rule", "dry_run"}, nil)
)

// insightCollector exports a bounded top-N of the digests and the query
// rules' hits.
type insightCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (insightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- digestTimeDesc
	ch <- digestCountDesc
	ch <- digestEvictedDesc
	ch <- ruleHitsDesc
}

// Collect implements prometheus.Collector.
func (c insightCollector) Collect(ch chan<- prometheus.Metric) {
	digests, evicted := c.s.QueryDigests(querystats.ByTotalTime, metricsTopN)
	for i := range digests {
		d := &digests[i]
		labels := []string{string(rune('0' + i)), d.Fingerprint.String(), d.User, d.Database, d.Cluster}
		ch <- prometheus.MustNewConstMetric(digestTimeDesc, prometheus.CounterValue, d.TotalTime.Seconds(), labels...)
		ch <- prometheus.MustNewConstMetric(digestCountDesc, prometheus.CounterValue, float64(d.Count), labels...)
	}
	ch <- prometheus.MustNewConstMetric(digestEvictedDesc, prometheus.CounterValue, float64(evicted))
	for _, r := range c.s.QueryRules() {
		ch <- prometheus.MustNewConstMetric(ruleHitsDesc, prometheus.CounterValue, float64(r.Hits()), r.Name, "false")
		if r.DryRun {
			ch <- prometheus.MustNewConstMetric(ruleHitsDesc, prometheus.CounterValue, float64(r.DryRunHits()), r.Name, "true")
		}
	}
}
