package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	vtlog "vitess.io/vitess/go/vt/log"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/internal/httpserve"
	"github.com/directgate/directgate/owner"
)

// runOwner is `gateway owner`: the owner process of one cluster, listening
// on --listen or the cluster's owner address until SIGINT or SIGTERM;
// SIGHUP reloads the configuration and discovers the tables again. With
// topology.etcd the topology comes from etcd (and follows its changes),
// the process registers in the fleet, and, when the cluster has no owner
// address, it joins the cluster's owner election: it serves while it
// leads and stands by otherwise. With --http-listen it serves /healthz,
// /readyz and /metrics there, under the http section's token rules.
func runOwner(args []string, stderr io.Writer) error {
	fs := pflag.NewFlagSet("owner", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "gateway.yaml", "configuration file")
	cluster := fs.String("cluster", "", "the cluster to own; default: the only cluster")
	listen := fs.String("listen", "", "MySQL listen address for gateways (default: the cluster's owner key; required for owners elected in etcd)")
	advertise := fs.String("advertise", "", "the address gateways reach this owner at, when it leads (default: --listen; required when that is all interfaces)")
	httpListen := fs.String("http-listen", "off", "HTTP listen address for /healthz, /readyz and /metrics (\"off\" or empty: none; not loopback: needs http.token or http.insecure)")
	logLevel := fs.String("log-level", "", "log level: trace, debug, info, warn, error (overrides log.level)")
	logFormat := fs.String("log-format", "", "log format: text or json (overrides log.format)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *httpListen == "" {
		*httpListen = "off"
	}
	load := func() (*config.Config, error) {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return nil, err
		}
		if *logLevel != "" {
			cfg.Log.Level = *logLevel
		}
		if *logFormat != "" {
			cfg.Log.Format = *logFormat
		}
		return cfg, cfg.Validate()
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if err := cfg.CheckHTTPListen("--http-listen", *httpListen); err != nil {
		return err
	}
	base := cfg // the file, before any topology from etcd
	log := newLogger(cfg.Log, stderr).ResetNamed("owner")
	vtlog.SwapLogger(newSlogBridge(log.Named("vitess")))

	fc, cfg, topoDoc, topoRev, err := fleetTopology(base, log)
	if err != nil {
		return err
	}
	if fc != nil {
		defer fc.Close()
	}
	if *cluster == "" {
		if len(cfg.Clusters) != 1 {
			return errors.New("owner: --cluster is required when the configuration has several clusters")
		}
		*cluster = cfg.Clusters[0].Name
	}
	log = log.With("cluster", *cluster)
	cl := clusterNamed(cfg, *cluster)
	elected := fc != nil && cl != nil && cl.Owner == ""
	addr := *listen
	if addr == "" && cl != nil {
		addr = cl.Owner
	}
	if elected && addr == "" {
		return fmt.Errorf("owner: cluster %s has no owner address, so its owners are elected in etcd: give --listen ADDR (and --advertise ADDR if gateways reach it at another address)", *cluster)
	}
	opts := []owner.Option{owner.WithListen(addr)}
	var candidate *fleet.Candidate
	if elected {
		if *advertise == "" {
			*advertise = addr
		}
		if err := checkAdvertise(*advertise); err != nil {
			return err
		}
		candidate = fc.Election(fleet.RoleOwners, *cluster).Candidate(*advertise)
		opts = append(opts, owner.WithLeadership(candidate))
	}

	o, err := owner.New(cfg, *cluster, log, opts...)
	if err != nil {
		return err
	}
	if err := o.Listen(); err != nil {
		return errors.Join(err, o.Shutdown(context.Background()))
	}
	var httpSrv *http.Server
	httpAddr := ""
	if *httpListen != "off" {
		ln, err := httpserve.Listen(*httpListen, cfg.HTTP)
		if err != nil {
			return errors.Join(err, o.Shutdown(context.Background()))
		}
		httpAddr = ln.Addr().String()
		httpSrv = httpserve.NewServer(o.HTTPHandler(cfg.HTTP))
		go func() { _ = httpSrv.Serve(ln) }()
		log.Info("serving HTTP", "addr", httpAddr, "tls", cfg.HTTP.Cert != "", "token", cfg.HTTP.Token != "")
	}
	// The fleet: registration and topology first, then the candidacy,
	// which ends first (the standby takes over before the drain).
	var agent *fleet.Agent
	stopCampaign := func() {}
	if fc != nil {
		fleetCtx, stopFleet := context.WithCancel(context.Background())
		m := fleet.Member{Kind: fleet.KindOwner, ID: memberID(o.Addr()), Addr: o.Addr().String(), HTTP: httpAddr, Cluster: *cluster,
			Version: version, Started: time.Now().UTC()}
		if candidate != nil {
			m.Addr, m.Role = *advertise, "standby"
		}
		agent = fc.StartAgent(fleetCtx, m, base, topoDoc, topoRev, o)
		o.Registry().MustRegister(agent.Collectors()...)
		defer func() { stopFleet(); <-agent.Done() }()
		if candidate != nil {
			campaignCtx, cancel := context.WithCancel(fleetCtx)
			candidate.Campaign(campaignCtx)
			go followRole(campaignCtx, candidate, agent)
			leaders := fc.Election(fleet.RoleOwners, *cluster).Observe(fleetCtx)
			stopCampaign = func() {
				cancel()
				select {
				case <-candidate.Done():
				case <-time.After(5 * time.Second):
					log.Warn("resigning the leadership took more than 5s; the lease will expire by itself")
				}
				awaitHandOver(leaders, *advertise)
			}
		}
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOwnerOnHUP(hup, load, o, agent, log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- o.Serve() }()
	select {
	case err := <-serveErr:
		if err != nil {
			log.Error("serving stopped", "error", err)
		}
		stopCampaign()
		return errors.Join(err, shutdown(o, httpSrv, cfg.DrainTimeout))
	case <-ctx.Done():
	}
	stop()
	if candidate != nil {
		log.Info("shutting down: resigning the leadership first")
	}
	stopCampaign()
	log.Info("shutting down: ending streams, draining statements", "timeout", cfg.DrainTimeout)
	err = shutdown(o, httpSrv, cfg.DrainTimeout)
	if serr := <-serveErr; serr != nil {
		err = errors.Join(err, serr)
	}
	if err == nil {
		log.Info("stopped cleanly")
	}
	return err
}

// clusterNamed returns the cluster named name in cfg, or nil.
func clusterNamed(cfg *config.Config, name string) *config.Cluster {
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Name == name {
			return &cfg.Clusters[i]
		}
	}
	return nil
}

// checkAdvertise refuses an address gateways could not dial: all
// interfaces, or no port.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (port == "" || port == "0") {
		err = errors.New("no port")
	}
	if err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			err = errors.New("it is all interfaces, not an address gateways can dial")
		}
	}
	if err != nil {
		return fmt.Errorf("owner: the address to advertise to gateways, %q: %v; give --advertise HOST:PORT", addr, err)
	}
	return nil
}

// Hand-over bounds: how long a resigning owner waits for the election to
// name another leader, and then for gateways to move to it.
const (
	handOverWait  = 3 * time.Second
	handOverGrace = 250 * time.Millisecond
)

// awaitHandOver waits, after a resignation, until the election no longer
// names self, plus a grace for gateways to move their pools: until then
// statements get the standby's 1290 and go to the new leader, whereas a
// statement sent on a connection the drain closes may have run and is
// not sent again.
func awaitHandOver(leaders *fleet.Observer, self string) {
	deadline := time.After(handOverWait)
	for {
		leader, changed := leaders.Leader()
		if leader != self {
			select {
			case <-time.After(handOverGrace):
			case <-deadline:
			}
			return
		}
		select {
		case <-changed:
		case <-deadline:
			return
		}
	}
}

// followRole keeps the owner's fleet record's role ("leader" or
// "standby") in step with its candidacy until ctx ends.
func followRole(ctx context.Context, c *fleet.Candidate, agent *fleet.Agent) {
	for {
		changed := c.Changed()
		role := "standby"
		if c.Term() != 0 {
			role = "leader"
		}
		agent.UpdateMember(func(m *fleet.Member) { m.Role = role })
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// reloadOwnerOnHUP re-reads the configuration on every SIGHUP (with
// topology.etcd, merged with the topology from etcd); an invalid file is
// logged and the running configuration stays.
func reloadOwnerOnHUP(hup <-chan os.Signal, load func() (*config.Config, error), o *owner.Owner, agent *fleet.Agent, log hclog.Logger) {
	for range hup {
		cfg, err := load()
		switch {
		case err != nil:
		case agent != nil && cfg.FromEtcd():
			err = agent.SetBase(cfg)
		case agent != nil || cfg.FromEtcd():
			err = errors.New("topology.etcd cannot be turned on or off by a reload; restart the owner")
		default:
			err = o.Reload(cfg)
		}
		if err != nil {
			log.Error("reload refused; the running configuration stays", "error", err)
			continue
		}
		log.Info("configuration reloaded; discovering tables again")
	}
}
