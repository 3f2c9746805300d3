package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS configures TLS between clients and the gateway. It is reloaded with
// SIGHUP: new clients get the new certificate, connected ones keep theirs.
type TLS struct {
	// Cert and Key are PEM files: the gateway's certificate (with any
	// intermediates after it) and its private key. Both or neither; empty
	// means the gateway offers no TLS.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// CA is a PEM file of certificate authorities. When set, the gateway
	// asks clients for a certificate, and one that presents a certificate
	// must present one signed by these authorities; clients without a
	// certificate are still admitted (certificates are not mapped to
	// users). Empty: client certificates are not asked for. Needs Cert.
	CA string `yaml:"ca"`
	// RequireSecureTransport refuses clients that did not switch to TLS,
	// after their handshake response, with error 3159 as MariaDB's
	// require_secure_transport does. Default false. Needs Cert.
	RequireSecureTransport bool `yaml:"require_secure_transport"`
}

// Enabled reports whether the gateway offers TLS to clients.
func (t TLS) Enabled() bool { return t.Cert != "" }

func (t TLS) validate(k string, bad func(key, format string, args ...any)) {
	if (t.Cert == "") != (t.Key == "") {
		bad(k, "cert and key go together: set both or neither")
	}
	if t.Cert == "" && t.CA != "" {
		bad(k+".ca", "needs %s.cert and %s.key", k, k)
	}
	if t.Cert == "" && t.RequireSecureTransport {
		bad(k+".require_secure_transport", "needs %s.cert and %s.key", k, k)
	}
}

// ServerConfig reads the files and returns the tls.Config the gateway
// serves clients with (TLS 1.2 and up), or nil when TLS is not configured.
// Errors name the key of the file that failed.
func (t TLS) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := loadKeyPair("tls", t.Cert, t.Key)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.CA != "" {
		pool, err := loadPool("tls.ca", t.CA)
		if err != nil {
			return nil, err
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return conf, nil
}

// Modes of BackendTLS.Mode, named as MySQL's --ssl-mode.
const (
	// TLSDisabled never uses TLS. The default.
	TLSDisabled = "disabled"
	// TLSPreferred uses TLS when the backend offers it, without verifying
	// its certificate; a backend without TLS gets a plain connection.
	TLSPreferred = "preferred"
	// TLSRequired fails when the backend does not offer TLS; its
	// certificate is not verified.
	TLSRequired = "required"
	// TLSVerifyCA is TLSRequired plus a check of the backend's
	// certificate chain against the CA file (the system's authorities
	// when none), not of its host name.
	TLSVerifyCA = "verify_ca"
	// TLSVerifyIdentity is TLSVerifyCA plus a check that the certificate
	// names the host of the backend's address (DNS name or IP SAN).
	TLSVerifyIdentity = "verify_identity"
)

// BackendTLS configures TLS from the gateway (pools and probes) to one
// cluster's backends. It is reloaded with SIGHUP: new connections use the
// new settings, open ones keep theirs until they close.
type BackendTLS struct {
	// Mode is disabled, preferred, required, verify_ca or
	// verify_identity. Default disabled.
	Mode string `yaml:"mode"`
	// CA is a PEM file of the authorities the backends' certificates are
	// checked against, for verify_ca and verify_identity. Empty: the
	// system's authorities.
	CA string `yaml:"ca"`
	// Cert and Key are PEM files of a client certificate presented to the
	// backends (for accounts that REQUIRE X509). Both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

func (b BackendTLS) validate(k string, bad func(key, format string, args ...any)) {
	switch b.Mode {
	case TLSDisabled:
		if b.CA != "" || b.Cert != "" || b.Key != "" {
			bad(k+".mode", "is disabled, so ca, cert and key would be ignored: set a mode")
		}
		return
	case TLSPreferred, TLSRequired:
		if b.CA != "" {
			bad(k+".ca", "is only used by verify_ca and verify_identity; with mode %s the certificate is not checked", b.Mode)
		}
	case TLSVerifyCA, TLSVerifyIdentity:
	default:
		bad(k+".mode", "%q is not one of disabled, preferred, required, verify_ca, verify_identity", b.Mode)
	}
	if (b.Cert == "") != (b.Key == "") {
		bad(k, "cert and key go together: set both or neither")
	}
}

// ClientConfig reads the files and returns the tls.Config for connections
// to the backends, and whether TLS is only preferred (a backend without it
// gets a plain connection). It returns nil for mode disabled. ServerName is
// left empty: the dialer sets it to the backend's host (wire.Dial and
// go-sql-driver both do). Errors name the key of the file that failed,
// under "backend_tls".
func (b BackendTLS) ClientConfig() (conf *tls.Config, preferred bool, err error) {
	if b.Mode == TLSDisabled || b.Mode == "" {
		return nil, false, nil
	}
	conf = &tls.Config{MinVersion: tls.VersionTLS12}
	if b.Cert != "" {
		cert, err := loadKeyPair("backend_tls", b.Cert, b.Key)
		if err != nil {
			return nil, false, err
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	var roots *x509.CertPool
	if b.CA != "" {
		if roots, err = loadPool("backend_tls.ca", b.CA); err != nil {
			return nil, false, err
		}
	}
	switch b.Mode {
	case TLSPreferred, TLSRequired:
		conf.InsecureSkipVerify = true
	case TLSVerifyCA:
		// The chain is checked, the host name is not: Go verifies both or
		// neither, so verification moves to VerifyConnection.
		conf.InsecureSkipVerify = true
		conf.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, roots) }
	case TLSVerifyIdentity:
		conf.RootCAs = roots
	}
	return conf, b.Mode == TLSPreferred, nil
}

// verifyChain checks the peer's certificate chain against roots (nil: the
// system's), ignoring the host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the backend sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

func loadKeyPair(k, certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.cert: %w", k, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.key: %w", k, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.cert, %s.key: %w", k, k, err)
	}
	return cert, nil
}

func loadPool(k, file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", k, file)
	}
	return pool, nil
}
