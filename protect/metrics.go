package protect

import (
	"github.com/directgate/directgate/config"
	"github.com/prometheus/client_golang/prometheus"
)

// The protections' Prometheus metrics, per cluster (Collector). The
// rows of single tables or backends are SHOW GATEWAY PROTECTIONS' and
// the status page's, not labels: their number is the users'.

// Hot-row protection.
var (
	descHotRowQueued = prometheus.NewDesc("directgate_hot_row_queued",
		"Statements waiting now in hot-row queues.", []string{"cluster"}, nil)
	descHotRowQueuedTotal = prometheus.NewDesc("directgate_hot_row_queued_total",
		"Statements that waited in a hot-row queue.", []string{"cluster"}, nil)
	descHotRowRefused = prometheus.NewDesc("directgate_hot_row_refused_total",
		"Statements refused by hot-row protection with error 1205: queue_full (hot_row.max_queue), max_wait (waited hot_row.max_wait) or deadlock (waiting would have closed a cycle of transactions waiting at the gateway for each other's rows).", []string{"cluster", "reason"}, nil)
	descHotRowDryRun = prometheus.NewDesc("directgate_hot_row_dry_run_total",
		"In dry-run mode, statements hot-row protection would have queued (would) or refused at once (would_refuse).", []string{"cluster", "outcome"}, nil)
	descHotRowMode = prometheus.NewDesc("directgate_hot_row_mode",
		"Hot-row protection's mode: 1 for the current one of off, on and dry_run.", []string{"cluster", "mode"}, nil)
)

// Transaction throttling.
var (
	descThrottleDelayed = prometheus.NewDesc("directgate_throttle_delayed",
		"Write transactions delayed now by transaction throttling, waiting for the replicas' lag to fall.", []string{"cluster"}, nil)
	descThrottleDelayedTotal = prometheus.NewDesc("directgate_throttle_delayed_total",
		"Write transactions delayed by transaction throttling (those refused included).", []string{"cluster"}, nil)
	descThrottleRefused = prometheus.NewDesc("directgate_throttle_refused_total",
		"Write transactions refused with error 1205 after waiting throttle.max_delay for the replicas' lag to fall.", []string{"cluster"}, nil)
	descThrottleInterrupted = prometheus.NewDesc("directgate_throttle_interrupted_total",
		"Delayed write transactions whose wait ended by KILL or the client leaving.", []string{"cluster"}, nil)
	descThrottleDryRun = prometheus.NewDesc("directgate_throttle_dry_run_total",
		"In dry-run mode, write transactions throttling would have delayed (would) or refused after throttle.max_delay (would_refuse).", []string{"cluster", "outcome"}, nil)
	descThrottleLag = prometheus.NewDesc("directgate_throttle_lag_seconds",
		"The worst known replication lag among the cluster's serving replicas, as throttling sees it (absent when none is known).", []string{"cluster"}, nil)
	descThrottleStopped = prometheus.NewDesc("directgate_throttle_sql_stopped",
		"1 when a serving replica's SQL thread is stopped, which throttling counts as lagging twice throttle.max_lag.", []string{"cluster"}, nil)
	descThrottleProbability = prometheus.NewDesc("directgate_throttle_probability",
		"The chance that a new write transaction of a user of the default priority 50 is delayed now (in dry-run mode: would be; 0 when throttling is off).", []string{"cluster"}, nil)
	descThrottleMode = prometheus.NewDesc("directgate_throttle_mode",
		"Transaction throttling's mode: 1 for the current one of off, on and dry_run.", []string{"cluster", "mode"}, nil)
)

// Query consolidation.
var (
	descConsolWaiting = prometheus.NewDesc("directgate_consolidation_waiting",
		"Reads waiting now for an identical read in flight (followers).", []string{"cluster"}, nil)
	descConsolFollowers = prometheus.NewDesc("directgate_consolidation_followers_total",
		"Reads answered with the result of an identical read in flight, without running on a backend.", []string{"cluster"}, nil)
	descConsolLeaders = prometheus.NewDesc("directgate_consolidation_leaders_total",
		"Reads whose result was shared with at least one follower.", []string{"cluster"}, nil)
	descConsolFallbacks = prometheus.NewDesc("directgate_consolidation_fallbacks_total",
		"Followers that ran their own read after waiting, by reason: too_large (the result was above consolidation.max_result_bytes), not_shareable (the leader's read failed, or answered an error, warnings or session state).", []string{"cluster", "reason"}, nil)
	descConsolMode = prometheus.NewDesc("directgate_consolidation_mode",
		"Query consolidation's mode: 1 for the current one of off and on.", []string{"cluster", "mode"}, nil)
)

// b2f is 1 for true.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metric sends a metric of cluster name.
func metric(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, name string, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, t, v, append([]string{name}, labels...)...)
}

// modes sends a mode gauge: 1 for the current one of modes.
func modes(ch chan<- prometheus.Metric, d *prometheus.Desc, name, mode string, modes ...string) {
	for _, m := range modes {
		metric(ch, d, prometheus.GaugeValue, b2f(m == mode), name, m)
	}
}

// Describe implements Collector.
func (h *HotRows) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHotRowQueued, descHotRowQueuedTotal, descHotRowRefused, descHotRowDryRun, descHotRowMode} {
		ch <- d
	}
}

// Collect implements Collector: the cluster row's counters.
func (h *HotRows) Collect(ch chan<- prometheus.Metric, name string, conf *config.Cluster) {
	r := h.Rows(conf)[0]
	metric(ch, descHotRowQueued, prometheus.GaugeValue, float64(r.Active), name)
	metric(ch, descHotRowQueuedTotal, prometheus.CounterValue, float64(r.Total), name)
	metric(ch, descHotRowRefused, prometheus.CounterValue, float64(r.Refused-r.RefusedWait-r.RefusedDeadlock), name, "queue_full")
	metric(ch, descHotRowRefused, prometheus.CounterValue, float64(r.RefusedWait), name, "max_wait")
	metric(ch, descHotRowRefused, prometheus.CounterValue, float64(r.RefusedDeadlock), name, "deadlock")
	metric(ch, descHotRowDryRun, prometheus.CounterValue, float64(r.DryRun), name, "would")
	metric(ch, descHotRowDryRun, prometheus.CounterValue, float64(r.DryRunRefused), name, "would_refuse")
	modes(ch, descHotRowMode, name, r.Mode, "off", "on", "dry_run")
}

// Describe implements Collector.
func (t *Throttle) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descThrottleDelayed, descThrottleDelayedTotal, descThrottleRefused, descThrottleInterrupted,
		descThrottleDryRun, descThrottleLag, descThrottleStopped, descThrottleProbability, descThrottleMode} {
		ch <- d
	}
}

// Collect implements Collector.
func (t *Throttle) Collect(ch chan<- prometheus.Metric, name string, conf *config.Cluster) {
	gauge := func(d *prometheus.Desc, v float64) { metric(ch, d, prometheus.GaugeValue, v, name) }
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		metric(ch, d, prometheus.CounterValue, v, name, labels...)
	}
	gauge(descThrottleDelayed, float64(t.delayed.Load()))
	counter(descThrottleDelayedTotal, float64(t.delayedTotal.Load()))
	counter(descThrottleRefused, float64(t.refused.Load()))
	counter(descThrottleInterrupted, float64(t.interrupted.Load()))
	counter(descThrottleDryRun, float64(t.wouldDelay.Load()), "would")
	counter(descThrottleDryRun, float64(t.wouldRefuse.Load()), "would_refuse")
	cfg := conf.Throttle
	modes(ch, descThrottleMode, name, throttleMode(cfg), "off", "on", "dry_run")
	v, _ := t.Lag()
	if v == nil {
		return
	}
	if v.replica != "" {
		gauge(descThrottleLag, v.lag.Seconds())
	}
	gauge(descThrottleStopped, b2f(v.stopped != ""))
	gauge(descThrottleProbability, throttleProbability(v, cfg.MaxLag, 50))
}

// Describe implements Collector.
func (co *Consolidation[K]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConsolWaiting, descConsolFollowers, descConsolLeaders, descConsolFallbacks, descConsolMode} {
		ch <- d
	}
}

// Collect implements Collector.
func (co *Consolidation[K]) Collect(ch chan<- prometheus.Metric, name string, conf *config.Cluster) {
	metric(ch, descConsolWaiting, prometheus.GaugeValue, float64(co.waiting.Load()), name)
	metric(ch, descConsolFollowers, prometheus.CounterValue, float64(co.followed.Load()), name)
	metric(ch, descConsolLeaders, prometheus.CounterValue, float64(co.leaders.Load()), name)
	metric(ch, descConsolFallbacks, prometheus.CounterValue, float64(co.tooLarge.Load()), name, "too_large")
	metric(ch, descConsolFallbacks, prometheus.CounterValue, float64(co.failed.Load()), name, "not_shareable")
	mode := "off"
	if conf.Consolidation.Enabled {
		mode = "on"
	}
	modes(ch, descConsolMode, name, mode, "off", "on")
}
