package config

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/directgate/directgate/queryrules"
	"gopkg.in/yaml.v3"
)

// TopologySource says where the clusters and users come from. Unset (the
// default): from this file. With Etcd, from etcd: the file's own clusters
// and users are ignored (the gateway logs a warning when it has any), and
// every gateway of the fleet applies the topology stored there, and each
// change to it, as a SIGHUP reload would. listen, http_listen, log and the
// other keys of this file still apply.
type TopologySource struct {
	// Etcd is the etcd cluster holding the topology.
	Etcd *Etcd `yaml:"etcd"`
}

// Etcd is how the gateway, the owner and `gateway topo` reach etcd.
type Etcd struct {
	// Endpoints are etcd's client addresses, host:port (or
	// http(s)://host:port). At least one.
	Endpoints []string `yaml:"endpoints"`
	// Prefix is the key prefix every fleet key lives under, so several
	// fleets can share one etcd. Default /directgate.
	Prefix string `yaml:"prefix"`
	// Username and Password log in to etcd when it has auth enabled.
	// PasswordFile or PasswordEnv may give the password instead.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	// TLS encrypts the connections to etcd (https endpoints).
	TLS EtcdTLS `yaml:"tls"`
	// DialTimeout bounds connecting to etcd. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// LeaseTTL is the lifetime of the leases that hold a gateway's
	// registration, the discovery prober's and the owner's leadership: a
	// process that stops renewing its lease loses them this long after its
	// last renewal. Whole seconds, at least 2s. Default 10s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// BudgetHold is how long the other gateways keep a gateway's floor
	// share of max_backend_connections reserved after its registration
	// vanished without a clean stop (a gateway cut from etcd keeps
	// serving from that floor; one that crashed frees it only then),
	// counted from the gateway's last refresh of its floor plus
	// lease_ttl. Default 5m; 0 turns the protection off: a gateway cut
	// from etcd keeps its pools as they are, and the others grow into its
	// share once its lease expires. Read at start, as the rest of
	// topology.etcd.
	BudgetHold *time.Duration `yaml:"budget_hold"`
}

// EtcdTLS configures TLS to etcd. All files are PEM.
type EtcdTLS struct {
	// CA verifies etcd's certificate. Empty: the system's authorities.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate, when etcd asks for one.
	// Both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name etcd's certificate must carry. Empty: the
	// endpoint's host.
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether TLS to etcd is configured.
func (t EtcdTLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.ServerName != "" }

// ClientConfig reads the files into a tls.Config, or returns nil when TLS
// is not configured.
func (t EtcdTLS) ClientConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pool, err := loadPool("topology.etcd.tls.ca", t.CA)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = pool
	}
	if t.Cert != "" {
		cert, err := loadKeyPair("topology.etcd.tls", t.Cert, t.Key)
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

func (e *Etcd) applyDefaults() {
	if e.Prefix == "" {
		e.Prefix = "/directgate"
	}
	if e.DialTimeout == 0 {
		e.DialTimeout = 5 * time.Second
	}
	if e.LeaseTTL == 0 {
		e.LeaseTTL = 10 * time.Second
	}
	if e.BudgetHold == nil {
		e.BudgetHold = ptr(5 * time.Minute)
	}
}

func (e *Etcd) validate(k string, bad func(key, format string, args ...any)) {
	if len(e.Endpoints) == 0 {
		bad(k+".endpoints", "at least one etcd endpoint is required")
	}
	for i, ep := range e.Endpoints {
		if strings.TrimSpace(ep) == "" {
			bad(fmt.Sprintf("%s.endpoints[%d]", k, i), "empty")
		}
	}
	if !strings.HasPrefix(e.Prefix, "/") || strings.HasSuffix(e.Prefix, "/") {
		bad(k+".prefix", "%q must start with / and not end with /", e.Prefix)
	}
	if e.DialTimeout <= 0 {
		bad(k+".dial_timeout", "must be positive")
	}
	if e.LeaseTTL < 2*time.Second || e.LeaseTTL%time.Second != 0 {
		bad(k+".lease_ttl", "%s must be whole seconds, at least 2s", e.LeaseTTL)
	}
	if e.BudgetHold != nil && *e.BudgetHold < 0 {
		bad(k+".budget_hold", "must not be negative (0 turns the protection off)")
	}
	if (e.TLS.Cert == "") != (e.TLS.Key == "") {
		bad(k+".tls", "cert and key go together: set both or neither")
	}
	if _, hash := nativeHash(e.Password); hash {
		bad(k+".password", "is a password hash: etcd needs the clear text")
	}
}

// Topology is what etcd holds for a fleet: the clusters and users, in the
// same schema as the file's keys of those names. `gateway topo put`
// stores one; every gateway applies it on top of its own file.
type Topology struct {
	Clusters []Cluster `yaml:"clusters"`
	Users    []User    `yaml:"users"`
	// QueryRules, when the document has the key, replace the file's
	// query_rules: the fleet's rules travel with its topology.
	QueryRules *[]queryrules.Spec `yaml:"query_rules"`
}

// ParseTopology decodes a topology document, rejecting unknown keys. It
// does not validate it: WithTopology does, in the context of a whole
// configuration.
func ParseTopology(data []byte) (*Topology, error) {
	var t Topology
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return &t, nil
}

// WithTopology returns a copy of c whose clusters and users are those of
// the topology document data: secrets resolved (a password_file or
// password_env is read on this machine), defaults applied, the whole
// validated. c itself is not changed.
func (c *Config) WithTopology(data []byte) (*Config, error) {
	t, err := ParseTopology(data)
	if err != nil {
		return nil, err
	}
	if len(t.Clusters) == 0 || len(t.Users) == 0 {
		return nil, fmt.Errorf("topology: needs at least one cluster and one user (has %d and %d)", len(t.Clusters), len(t.Users))
	}
	n := *c
	n.Clusters, n.Users, n.FileTopologyIgnored = t.Clusters, t.Users, false
	if t.QueryRules != nil {
		n.QueryRules = *t.QueryRules
	}
	if err := n.resolveSecretsOf(false); err != nil {
		return nil, err
	}
	n.ApplyDefaults()
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &n, nil
}

// FromEtcd reports whether the clusters and users come from etcd.
func (c *Config) FromEtcd() bool { return c.Topology.Etcd != nil }
