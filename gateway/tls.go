package gateway

import (
	"crypto/tls"

	"github.com/directgate/directgate/config"
)

// erSecureTransportRequired is MariaDB's ER_SECURE_TRANSPORT_REQUIRED.
const erSecureTransportRequired = 3159

// clientTLS is the gateway's TLS offer to clients. A reload swaps the
// whole value: new clients get the new certificate, connected ones keep
// their TLS session.
type clientTLS struct {
	// conf is nil when the gateway offers no TLS.
	conf *tls.Config
	// require refuses clients that stay plain (require_secure_transport).
	require bool
}

// loadClientTLS reads the certificate files of t.
func loadClientTLS(t config.TLS) (*clientTLS, error) {
	conf, err := t.ServerConfig()
	if err != nil {
		return nil, err
	}
	return &clientTLS{conf: conf, require: t.RequireSecureTransport}, nil
}

// backendTLS is how a cluster's pools and probes encrypt their
// connections; a reload swaps it for new connections.
type backendTLS struct {
	// conf is nil for mode disabled.
	conf *tls.Config
	// preferred falls back to a plain connection when the backend does
	// not offer TLS.
	preferred bool
}

// loadBackendTLS reads the files of cl.BackendTLS.
func loadBackendTLS(cl config.Cluster) (*backendTLS, error) {
	conf, preferred, err := cl.BackendTLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	return &backendTLS{conf: conf, preferred: preferred}, nil
}
