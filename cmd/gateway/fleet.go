package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/fleet"
	"github.com/directgate/directgate/forward"
	"github.com/directgate/directgate/gateway"
)

// topologyWait bounds how long a gateway or owner starting with
// topology.etcd waits for etcd to answer before it gives up.
const topologyWait = time.Minute

// fleetTopology connects to the fleet's etcd and merges its topology into
// base (the file), for a process starting with topology.etcd. Without
// it, it returns base and no client.
func fleetTopology(base *config.Config, log hclog.Logger) (*fleet.Client, *config.Config, []byte, int64, error) {
	if !base.FromEtcd() {
		return nil, base, nil, 0, nil
	}
	if base.FileTopologyIgnored {
		log.Warn("topology.etcd is set: the file's clusters and users are ignored; the topology comes from etcd")
	}
	fc, err := fleet.Dial(base.Topology.Etcd, log.Named("fleet"))
	if err != nil {
		return nil, nil, nil, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), topologyWait)
	defer cancel()
	cfg, rev, doc, err := fc.LoadTopology(ctx, base)
	if err != nil {
		fc.Close()
		return nil, nil, nil, 0, fmt.Errorf("topology from etcd %s (prefix %s): %w", strings.Join(base.Topology.Etcd.Endpoints, ","), base.Topology.Etcd.Prefix, err)
	}
	log.Info("topology loaded from etcd", "revision", rev, "clusters", len(cfg.Clusters), "users", len(cfg.Users))
	return fc, cfg, doc, rev, nil
}

// ownerLeaders makes the gateway's clusters without an owner address
// forward to the leader of their owners' election, observed until ctx
// ends.
func ownerLeaders(ctx context.Context, fc *fleet.Client) gateway.Option {
	return gateway.WithOwnerLeaders(func(cluster string) forward.Leader {
		return fc.Election(fleet.RoleOwners, cluster).Observe(ctx)
	})
}

// memberID names this process in the fleet: host-pid-port.
func memberID(addr net.Addr) string {
	host, _ := os.Hostname()
	port := ""
	if a, ok := addr.(*net.TCPAddr); ok {
		port = fmt.Sprint(a.Port)
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), port)
}

const topoUsage = `usage:
  gateway topo put --config FILE --file TOPOLOGY.yaml   store the clusters and users of TOPOLOGY.yaml in etcd
  gateway topo get --config FILE                         print the stored topology
  gateway topo status --config FILE                      list live gateways and owners, the revision each applied
`

// runTopo is `gateway topo`: the fleet's topology in etcd, for operators.
func runTopo(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topoUsage)
		return errors.New("topo: a subcommand is required")
	}
	sub := args[0]
	fs := pflag.NewFlagSet("topo "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "gateway.yaml", "configuration file with topology.etcd")
	file := fs.String("file", "", "topology file to store (put): YAML with clusters and users")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	base, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if !base.FromEtcd() {
		return fmt.Errorf("topo: %s has no topology.etcd: set topology: {etcd: {endpoints: [...]}}", *cfgPath)
	}
	fc, err := fleet.Dial(base.Topology.Etcd, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	defer fc.Close()
	ctx := context.Background()
	switch sub {
	case "put":
		if *file == "" {
			return errors.New("topo put: --file is required")
		}
		doc, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		rev, err := fc.PutTopology(ctx, base, doc)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stored %s at revision %d\n", *file, rev)
	case "get":
		doc, rev, err := fc.GetTopology(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# revision %d\n%s", rev, doc)
	case "status":
		return topoStatus(ctx, fc, stdout)
	default:
		fmt.Fprint(stderr, topoUsage)
		return fmt.Errorf("topo: unknown subcommand %q", sub)
	}
	return nil
}

// topoStatus prints the stored revision and every live member.
func topoStatus(ctx context.Context, fc *fleet.Client, w io.Writer) error {
	_, rev, err := fc.GetTopology(ctx)
	if err != nil && !errors.Is(err, fleet.ErrNoTopology) {
		return err
	}
	members, err := fc.Members(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "topology revision %d\n", rev)
	if leaders, err := fc.DiscoveryLeaders(ctx); err == nil {
		for cl, id := range leaders {
			fmt.Fprintf(w, "discovery of cluster %s: probed by %s\n", cl, id)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tADDR\tCLUSTER\tROLE\tREVISION\tVERSION\tSTARTED\tUPDATED")
	for _, m := range members {
		state := "-"
		if m.Revision != rev && m.Kind == fleet.KindGateway {
			state = "behind"
		}
		if m.Role != "" {
			state = m.Role
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s ago\n", m.Kind, m.ID, m.Addr, dash(m.Cluster), state, m.Revision, m.Version,
			m.Started.Local().Format(time.DateTime), time.Since(m.Updated).Round(time.Second))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
