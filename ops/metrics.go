package ops

import (
	"time"

	"github.com/directgate/directgate/healthcheck"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/querystats"
	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are the Prometheus collectors that read g's state at scrape
// time: backends and their health, pools, the owner pools, sessions and
// pins, refusals and discovery, and a bounded top of the query digests
// with the query rules' hits. The gateway registers them beside the
// counters its query path updates.
func Collectors(g Gateway) []prometheus.Collector {
	return []prometheus.Collector{stateCollector{g: g}, insightCollector{g: g}}
}

// stateCollector reads the gateway's state at scrape time.
type stateCollector struct{ g Gateway }

// Descriptions of the state metrics.
var (
	poolLabels    = []string{"cluster", "backend", "pool"}
	backendLabels = []string{"cluster", "backend"}

	descClientsOpen = prometheus.NewDesc("directgate_client_connections",
		"Client connections open now (logged in or still in the handshake).", nil, nil)
	descSessions = prometheus.NewDesc("directgate_sessions_total",
		"Client sessions that logged in.", nil, nil)
	descSessionsSticky = prometheus.NewDesc("directgate_sessions_pinned_by_state_total",
		"Sessions that were ever pinned by session state (anything but transactions and one-statement holds).", nil, nil)
	descPins = prometheus.NewDesc("directgate_session_pins_total",
		"Times a session got pinned to its backend connection, by reason.", []string{"reason"}, nil)
	descPinned = prometheus.NewDesc("directgate_sessions_pinned",
		"Sessions pinned to a backend connection now, by reason (a session may count under several; the one-statement holds last_result and warnings are not counted).", []string{"reason"}, nil)
	descInTxn = prometheus.NewDesc("directgate_sessions_in_transaction",
		"Sessions in an open transaction now.", nil, nil)
	descSplitBrain = prometheus.NewDesc("directgate_split_brain_refusals_total",
		"Statements refused at once because a cluster had several writable backends.", nil, nil)
	descNoPrimary = prometheus.NewDesc("directgate_no_primary_failures_total",
		"Statements that failed because no primary appeared within failover_buffer.", nil, nil)

	descRounds = prometheus.NewDesc("directgate_discovery_rounds_total",
		"Discovery probe rounds completed.", nil, nil)
	descSnapshotAge = prometheus.NewDesc("directgate_discovery_snapshot_age_seconds",
		"Time since discovery last published a snapshot (every round, and on each reported failure).", nil, nil)
	descRoundDuration = prometheus.NewDesc("directgate_discovery_round_duration_seconds",
		"Wall time of the last completed discovery round (about ceil(backends / batch_size) × probe time).", nil, nil)
	descProbesInFlight = prometheus.NewDesc("directgate_discovery_probes_in_flight",
		"Discovery probes running now, regular and targeted (at most batch_size in a round).", nil, nil)
	descProbes = prometheus.NewDesc("directgate_discovery_probes_total",
		"Discovery probes since start, by result.", []string{"result"}, nil)
	descHasPrimary = prometheus.NewDesc("directgate_cluster_has_primary",
		"1 when the cluster has a primary, else 0.", []string{"cluster"}, nil)
	descSplit = prometheus.NewDesc("directgate_cluster_split_brain",
		"1 when several backends of the cluster are writable (writes are refused), else 0.", []string{"cluster"}, nil)

	descState = prometheus.NewDesc("directgate_backend_state",
		"The backend's discovery state: 1 for the current one of unknown, serving, not_serving.", append(backendLabels, "state"), nil)
	descStateSince = prometheus.NewDesc("directgate_backend_state_since_timestamp_seconds",
		"When the backend entered its current state (Unix time).", backendLabels, nil)
	descRole = prometheus.NewDesc("directgate_backend_role",
		"The backend's role: 1 for the current one of none, primary, replica, split_brain.", append(backendLabels, "role"), nil)
	descLag = prometheus.NewDesc("directgate_backend_replication_lag_seconds",
		"Replication lag of the last probe; absent when unknown (not a replica, replication stopped, or no privilege to read it).", backendLabels, nil)
	descSlow = prometheus.NewDesc("directgate_backend_slow",
		"1 while the backend's probe round trip is above its cluster's max_replica_latency (a replica then gets no reads), else 0.", backendLabels, nil)
	descProbeRTT = prometheus.NewDesc("directgate_backend_probe_rtt_seconds",
		"Round-trip time of the last probe's SELECT 1.", backendLabels, nil)
	descLastProbe = prometheus.NewDesc("directgate_backend_last_probe_timestamp_seconds",
		"When the last probe result arrived (Unix time); absent before the first.", backendLabels, nil)
	descInFlight = prometheus.NewDesc("directgate_backend_statements_in_flight",
		"Statements running on the backend now.", backendLabels, nil)
	descScore = prometheus.NewDesc("directgate_backend_latency_score_seconds",
		"The backend's latency score: a moving average of its statements' latency over the last seconds, used to choose replicas; 0 before the first statement.", backendLabels, nil)

	descPoolMax = prometheus.NewDesc("directgate_pool_max_connections",
		"Most connections the pool opens (pool.size; owner_pool_size for pool=\"owner\").", poolLabels, nil)
	descPoolConns = prometheus.NewDesc("directgate_pool_connections",
		"Connections of the pool now, by state: in_use (leased), idle, dialing (being opened).", append(poolLabels, "state"), nil)
	descPoolWaits = prometheus.NewDesc("directgate_pool_waits_total",
		"Acquires that found no idle connection and waited.", poolLabels, nil)
	descPoolWaitTime = prometheus.NewDesc("directgate_pool_wait_seconds_total",
		"Time spent by acquires that waited.", poolLabels, nil)
	descPoolQueueWait = prometheus.NewDesc("directgate_pool_queue_wait_seconds",
		"How long an acquire waits for a connection now: 0 while none waits, else the longer of the waiting acquires' mean wait so far and the recent waits' average (about the last second). Load shedding compares it with shedding.max_queue_wait.", poolLabels, nil)
	descPoolTimeouts = prometheus.NewDesc("directgate_pool_acquire_timeouts_total",
		"Acquires that gave up after acquire_timeout (the client got error 1040).", poolLabels, nil)
	descPoolDials = prometheus.NewDesc("directgate_pool_dials_total",
		"Connections the pool started opening.", poolLabels, nil)
	descPoolDialErrors = prometheus.NewDesc("directgate_pool_dial_errors_total",
		"Connection opens that failed.", poolLabels, nil)
	descPoolAcquires = prometheus.NewDesc("directgate_pool_acquires_total",
		"Connections the pool's puddle handed out: found idle, released to a waiting acquire, or dialed for one.", poolLabels, nil)
	descPoolAcquireTime = prometheus.NewDesc("directgate_pool_acquire_seconds_total",
		"Time the pool's puddle spent handing those connections out (waits and dials included).", poolLabels, nil)
	descPoolEmptyAcquires = prometheus.NewDesc("directgate_pool_empty_acquires_total",
		"Acquires that found no idle connection in the pool's puddle and waited for a release or a dial.", poolLabels, nil)
	descPoolDestroyed = prometheus.NewDesc("directgate_pool_destroyed_total",
		"Connections closed for any reason: broken, expired, idle too long, over size, pool closed.", poolLabels, nil)
)

var allStateDescs = []*prometheus.Desc{
	descRoundDuration, descProbesInFlight, descProbes,
	descClientsOpen, descSessions, descSessionsSticky, descPins, descPinned, descInTxn, descSplitBrain, descNoPrimary,
	descRounds, descSnapshotAge, descHasPrimary, descSplit,
	descState, descStateSince, descRole, descLag, descSlow, descProbeRTT, descLastProbe, descInFlight, descScore,
	descPoolMax, descPoolConns, descPoolWaits, descPoolWaitTime, descPoolQueueWait, descPoolTimeouts, descPoolDials, descPoolDialErrors, descPoolDestroyed,
	descPoolAcquires, descPoolAcquireTime, descPoolEmptyAcquires,
}

var (
	stateNames = []healthcheck.State{healthcheck.StateUnknown, healthcheck.StateServing, healthcheck.StateNotServing}
	roleNames  = []healthcheck.Role{healthcheck.RoleNone, healthcheck.RolePrimary, healthcheck.RoleReplica, healthcheck.RoleSplitBrain}
)

// Describe implements prometheus.Collector.
func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allStateDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.g
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descClientsOpen, float64(g.ClientsOpen()))
	sessions, sticky, byReason := g.PinCounts()
	counter(descSessions, float64(sessions))
	counter(descSessionsSticky, float64(sticky))
	for reason, n := range byReason {
		counter(descPins, float64(n), reason)
	}
	pinned, inTxn := g.SessionCounts()
	for reason, n := range pinned {
		gauge(descPinned, float64(n), reason)
	}
	gauge(descInTxn, float64(inTxn))
	splitBrain, noPrimary := g.Refusals()
	counter(descSplitBrain, float64(splitBrain))
	counter(descNoPrimary, float64(noPrimary))

	snap, st, ok := g.Discovery()
	if ok {
		counter(descRounds, float64(snap.Round))
		gauge(descSnapshotAge, time.Since(snap.Time).Seconds())
		gauge(descRoundDuration, st.LastRoundDuration.Seconds())
		gauge(descProbesInFlight, float64(st.ProbesInFlight))
		counter(descProbes, float64(st.Probes-st.ProbeFailures), "ok")
		counter(descProbes, float64(st.ProbeFailures), "failed")
	}
	loads := g.BackendLoads()
	for _, name := range g.ClusterNames() {
		hc := snap.Cluster(name)
		gauge(descHasPrimary, b2f(hc != nil && hc.Primary != ""), name)
		gauge(descSplit, b2f(hc != nil && hc.SplitBrain), name)
		for _, be := range loads {
			if be.Cluster != name {
				continue
			}
			addr := be.Addr
			v := snap.Backend(addr)
			if v == nil {
				v = &healthcheck.BackendView{}
			}
			for _, st := range stateNames {
				gauge(descState, b2f(v.State == st), name, addr, st.String())
			}
			if !v.Since.IsZero() {
				gauge(descStateSince, float64(v.Since.UnixNano())/1e9, name, addr)
			}
			for _, r := range roleNames {
				gauge(descRole, b2f(v.Role == r), name, addr, r.String())
			}
			if v.Last.LagKnown {
				gauge(descLag, v.Last.Lag.Seconds(), name, addr)
			}
			gauge(descSlow, b2f(v.Slow), name, addr)
			if !v.LastProbe.IsZero() {
				gauge(descProbeRTT, v.Last.RTT.Seconds(), name, addr)
				gauge(descLastProbe, float64(v.LastProbe.UnixNano())/1e9, name, addr)
			}
			gauge(descInFlight, float64(be.InFlight), name, addr)
			gauge(descScore, be.Score.Seconds(), name, addr)
		}
	}
	for _, p := range g.PoolStats() {
		collectPool(ch, p.Stat, p.Cluster, p.Backend, PoolLabel(p))
	}
}

// PoolLabel is the pool label of a pool: default, found_rows (the pool of
// CLIENT_FOUND_ROWS clients) or owner for the cluster's account; for a
// user's own backend account (users[].backend_user) user:NAME or
// user:NAME/found_rows, so that every pool's labels differ.
func PoolLabel(p PoolStat) string {
	switch {
	case p.Owner:
		return "owner"
	case p.UserPool && p.FoundRows:
		return "user:" + p.BackendUser + "/found_rows"
	case p.UserPool:
		return "user:" + p.BackendUser
	case p.FoundRows:
		return "found_rows"
	}
	return "default"
}

// collectPool sends the metrics of one pool.
func collectPool(ch chan<- prometheus.Metric, st pools.Stat, labels ...string) {
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(labels, extra...)...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descPoolMax, float64(st.Size))
	gauge(descPoolConns, float64(st.InUse), "in_use")
	gauge(descPoolConns, float64(st.Idle), "idle")
	gauge(descPoolConns, float64(st.Dialing), "dialing")
	counter(descPoolWaits, float64(st.Waits))
	counter(descPoolWaitTime, st.WaitTime.Seconds())
	gauge(descPoolQueueWait, st.QueueWait.Seconds())
	counter(descPoolTimeouts, float64(st.AcquireTimeouts))
	counter(descPoolDials, float64(st.Dials))
	counter(descPoolDialErrors, float64(st.DialErrors))
	counter(descPoolDestroyed, float64(st.Destroyed))
	counter(descPoolAcquires, float64(st.Acquires))
	counter(descPoolAcquireTime, st.AcquireTime.Seconds())
	counter(descPoolEmptyAcquires, float64(st.EmptyAcquires))
}

// b2f is 1 for true.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

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
type insightCollector struct{ g Gateway }

// Describe implements prometheus.Collector.
func (insightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- digestTimeDesc
	ch <- digestCountDesc
	ch <- digestEvictedDesc
	ch <- ruleHitsDesc
}

// Collect implements prometheus.Collector.
func (c insightCollector) Collect(ch chan<- prometheus.Metric) {
	digests, evicted := c.g.QueryDigests(querystats.ByTotalTime, metricsTopN)
	for i := range digests {
		d := &digests[i]
		labels := []string{string(rune('0' + i)), d.Fingerprint.String(), d.User, d.Database, d.Cluster}
		ch <- prometheus.MustNewConstMetric(digestTimeDesc, prometheus.CounterValue, d.TotalTime.Seconds(), labels...)
		ch <- prometheus.MustNewConstMetric(digestCountDesc, prometheus.CounterValue, float64(d.Count), labels...)
	}
	ch <- prometheus.MustNewConstMetric(digestEvictedDesc, prometheus.CounterValue, float64(evicted))
	for _, r := range c.g.QueryRules() {
		ch <- prometheus.MustNewConstMetric(ruleHitsDesc, prometheus.CounterValue, float64(r.Hits()), r.Name, "false")
		if r.DryRun {
			ch <- prometheus.MustNewConstMetric(ruleHitsDesc, prometheus.CounterValue, float64(r.DryRunHits()), r.Name, "true")
		}
	}
}
