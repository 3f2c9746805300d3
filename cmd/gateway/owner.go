package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	vtlog "vitess.io/vitess/go/vt/log"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/owner"
)

// runOwner is `gateway owner`: the owner process of one cluster, listening
// on the cluster's owner address until SIGINT or SIGTERM; SIGHUP reloads
// the configuration and discovers the tables again.
func runOwner(args []string, stderr io.Writer) error {
	fs := pflag.NewFlagSet("owner", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "gateway.yaml", "configuration file")
	cluster := fs.String("cluster", "", "the cluster to own (its owner key is the listen address); default: the only cluster")
	logLevel := fs.String("log-level", "", "log level: trace, debug, info, warn, error (overrides log.level)")
	logFormat := fs.String("log-format", "", "log format: text or json (overrides log.format)")
	if err := fs.Parse(args); err != nil {
		return err
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
	if *cluster == "" {
		if len(cfg.Clusters) != 1 {
			return errors.New("owner: --cluster is required when the configuration has several clusters")
		}
		*cluster = cfg.Clusters[0].Name
	}
	log := newLogger(cfg.Log, stderr).ResetNamed("owner").With("cluster", *cluster)
	vtlog.SwapLogger(newSlogBridge(log.Named("vitess")))

	o, err := owner.New(cfg, *cluster, log)
	if err != nil {
		return err
	}
	if err := o.Listen(); err != nil {
		return errors.Join(err, o.Shutdown(context.Background()))
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOwnerOnHUP(hup, load, o, log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- o.Serve() }()
	select {
	case err := <-serveErr:
		if err != nil {
			log.Error("serving stopped", "error", err)
		}
		return errors.Join(err, shutdownOwner(o, cfg))
	case <-ctx.Done():
	}
	stop()
	log.Info("shutting down: ending streams, draining statements", "timeout", cfg.DrainTimeout)
	err = shutdownOwner(o, cfg)
	if serr := <-serveErr; serr != nil {
		err = errors.Join(err, serr)
	}
	if err == nil {
		log.Info("stopped cleanly")
	}
	return err
}

func shutdownOwner(o *owner.Owner, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	return o.Shutdown(ctx)
}

// reloadOwnerOnHUP re-reads the configuration on every SIGHUP; an invalid
// file is logged and the running configuration stays.
func reloadOwnerOnHUP(hup <-chan os.Signal, load func() (*config.Config, error), o *owner.Owner, log hclog.Logger) {
	for range hup {
		cfg, err := load()
		if err == nil {
			err = o.Reload(cfg)
		}
		if err != nil {
			log.Error("reload refused; the running configuration stays", "error", err)
			continue
		}
		log.Info("configuration reloaded; discovering tables again")
	}
}
