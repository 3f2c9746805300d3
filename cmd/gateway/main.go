// Command gateway is the directgate MySQL gateway.
//
//	gateway serve --config gateway.yaml [--listen ADDR] [--log-level LEVEL]
//	gateway owner --config gateway.yaml --cluster NAME [--listen ADDR] [--http-listen ADDR] [--log-level LEVEL]
//	gateway topo put|get|status --config gateway.yaml [--file TOPOLOGY.yaml]
//	gateway version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/gateway"
	"github.com/directgate/directgate/internal/httpserve"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	vtlog "vitess.io/vitess/go/vt/log"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  gateway serve --config FILE [--listen ADDR] [--http-listen ADDR] [--log-level LEVEL] [--log-format text|json]
  gateway owner --config FILE [--cluster NAME] [--listen ADDR] [--advertise ADDR] [--http-listen ADDR] [--log-level LEVEL] [--log-format text|json]
  gateway topo put|get|status --config FILE [--file TOPOLOGY.yaml]
  gateway version
`

// run is main without the exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "gateway %s\n", version)
		return 0
	case "serve":
		if err := serve(args[1:], stderr); err != nil {
			fmt.Fprintf(stderr, "gateway: %v\n", err)
			return 1
		}
		return 0
	case "owner":
		if err := runOwner(args[1:], stderr); err != nil {
			fmt.Fprintf(stderr, "gateway owner: %v\n", err)
			return 1
		}
		return 0
	case "topo":
		if err := runTopo(args[1:], stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "gateway topo: %v\n", err)
			return 1
		}
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "gateway: unknown command %q\n%s", args[0], usage)
	return 2
}

func serve(args []string, stderr io.Writer) error {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "gateway.yaml", "configuration file")
	listen := fs.String("listen", "", "MySQL listen address (overrides listen)")
	httpListen := fs.String("http-listen", "", "HTTP listen address (overrides http_listen)")
	logLevel := fs.String("log-level", "", "log level: trace, debug, info, warn, error (overrides log.level)")
	logFormat := fs.String("log-format", "", "log format: text or json (overrides log.format)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile to this file at exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *httpListen != "" {
		cfg.HTTPListen = *httpListen
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	base := cfg // the file, before any topology from etcd
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *memProfile != "" {
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	log := newLogger(cfg.Log, stderr)
	vtlog.SwapLogger(newSlogBridge(log.Named("vitess")))
	if cfg.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.GoMaxProcs)
		log.Info("Go threads set by gomaxprocs", "gomaxprocs", cfg.GoMaxProcs)
	}

	var fc *fleet.Client
	var topoDoc []byte
	var topoRev int64
	if base.FromEtcd() {
		if fc, cfg, topoDoc, topoRev, err = fleetTopology(base, log); err != nil {
			return err
		}
		defer fc.Close()
	}
	var opts []gateway.Option
	if fc != nil {
		leadersCtx, stopLeaders := context.WithCancel(context.Background())
		defer stopLeaders()
		opts = append(opts, ownerLeaders(leadersCtx, fc))
	}
	if hook := crashHook(os.Getenv(crashPointEnv), log); hook != nil {
		opts = append(opts, gateway.WithCrashHook(hook))
	}
	srv, err := gateway.New(cfg, log, opts...)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return errors.Join(err, srv.Shutdown(context.Background()))
	}
	var agent *fleet.Agent
	if fc != nil {
		fleetCtx, stopFleet := context.WithCancel(context.Background())
		agent = fc.StartAgent(fleetCtx, fleet.Member{
			ID: memberID(srv.Addr()), Addr: srv.Addr().String(), HTTP: cfg.HTTPListen, Version: version, Started: time.Now().UTC(),
		}, base, topoDoc, topoRev, srv)
		srv.SetFleetStatus(agent.Status)
		srv.Registry().MustRegister(agent.Collectors()...)
		defer func() { stopFleet(); <-agent.Done() }()
	}
	var httpSrv *http.Server
	if cfg.HTTPListen != "off" {
		ln, err := httpserve.Listen(cfg.HTTPListen, cfg.HTTP)
		if err != nil {
			return errors.Join(err, srv.Shutdown(context.Background()))
		}
		httpSrv = httpserve.NewServer(srv.HTTPHandler())
		go func() { _ = httpSrv.Serve(ln) }()
		log.Info("serving HTTP", "addr", ln.Addr().String(), "tls", cfg.HTTP.Cert != "", "token", cfg.HTTP.Token != "")
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHUP(hup, *cfgPath, srv, agent, log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	select {
	case err := <-serveErr:
		if err != nil {
			log.Error("serving stopped", "error", err)
		}
		return errors.Join(err, shutdown(srv, httpSrv, cfg.DrainTimeout))
	case <-ctx.Done():
	}
	stop()
	log.Info("shutting down: draining sessions", "timeout", cfg.DrainTimeout)
	err = shutdown(srv, httpSrv, cfg.DrainTimeout)
	if serr := <-serveErr; serr != nil {
		err = errors.Join(err, serr)
	}
	if err == nil {
		log.Info("stopped cleanly")
	}
	return err
}

// reloadOnHUP re-reads the config file on every SIGHUP and applies it (with
// topology.etcd, merged with the topology from etcd); an invalid file is
// logged with the reason and the running config stays.
func reloadOnHUP(hup <-chan os.Signal, path string, srv *gateway.Server, agent *fleet.Agent, log hclog.Logger) {
	for range hup {
		cfg, err := config.Load(path)
		switch {
		case err != nil:
		case agent != nil && cfg.FromEtcd():
			err = agent.SetBase(cfg)
		case agent != nil || cfg.FromEtcd():
			err = errors.New("topology.etcd cannot be turned on or off by a reload; restart the gateway")
		default:
			err = srv.Reload(cfg)
		}
		if err != nil {
			log.Error("reload refused; the running configuration stays", "file", path, "error", err)
			continue
		}
		log.Info("configuration reloaded", "file", path)
	}
}

// shutdowner is what shutdown stops first: the gateway or the owner.
type shutdowner interface {
	Shutdown(ctx context.Context) error
}

// shutdown stops the gateway (or the owner) within timeout, then the HTTP
// server (nil: none), and joins their errors.
func shutdown(srv shutdowner, httpSrv *http.Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	if httpSrv != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
		defer hcancel()
		err = errors.Join(err, httpSrv.Shutdown(hctx))
	}
	return err
}

func newLogger(c config.Log, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "gateway",
		Level:      hclog.LevelFromString(c.Level),
		JSONFormat: c.Format == "json",
		Output:     w,
		TimeFormat: time.RFC3339Nano,
	})
}
