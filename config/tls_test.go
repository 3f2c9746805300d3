package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.Enabled() || c.TLS.RequireSecureTransport {
		t.Errorf("client TLS on by default: %+v", c.TLS)
	}
	if c.Clusters[0].BackendTLS.Mode != TLSDisabled {
		t.Errorf("backend_tls.mode default %q", c.Clusters[0].BackendTLS.Mode)
	}
	if conf, err := c.TLS.ServerConfig(); conf != nil || err != nil {
		t.Errorf("ServerConfig without tls: %v, %v", conf, err)
	}
	if conf, _, err := c.Clusters[0].BackendTLS.ClientConfig(); conf != nil || err != nil {
		t.Errorf("ClientConfig for disabled: %v, %v", conf, err)
	}
}

func TestTLSErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		"tls: {cert: a.pem}\n" + minimal:                          "tls: cert and key",
		"tls: {ca: ca.pem}\n" + minimal:                           "tls.ca",
		"tls: {require_secure_transport: true}\n" + minimal:       "tls.require_secure_transport",
		"tls: {cert: a, key: b, bogus: 1}\n" + minimal:            "bogus",
		minimal + "    backend_tls: {mode: sometimes}\n":          "clusters[0].backend_tls.mode",
		minimal + "    backend_tls: {ca: ca.pem}\n":               "clusters[0].backend_tls.mode",
		minimal + "    backend_tls: {mode: required, ca: c}\n":    "clusters[0].backend_tls.ca",
		minimal + "    backend_tls: {mode: verify_ca, cert: c}\n": "clusters[0].backend_tls: cert and key",
	}
	for in, key := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: error %v does not name %s", in, err, key)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	certFile, keyFile := writeCert(t)
	c, err := Parse([]byte("tls: {cert: " + certFile + ", key: " + keyFile + ", ca: " + certFile + ", require_secure_transport: true}\n" + minimal +
		"    backend_tls: {mode: verify_ca, ca: " + certFile + ", cert: " + certFile + ", key: " + keyFile + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := c.TLS.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if sc.MinVersion != tls.VersionTLS12 || len(sc.Certificates) != 1 || sc.ClientAuth != tls.VerifyClientCertIfGiven || sc.ClientCAs == nil {
		t.Errorf("server config %+v", sc)
	}
	cc, preferred, err := c.Clusters[0].BackendTLS.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if preferred || !cc.InsecureSkipVerify || cc.VerifyConnection == nil || len(cc.Certificates) != 1 {
		t.Errorf("verify_ca config %+v", cc)
	}
	for mode, want := range map[string]bool{TLSPreferred: true, TLSRequired: false} {
		cc, preferred, err := BackendTLS{Mode: mode}.ClientConfig()
		if err != nil || preferred != want || !cc.InsecureSkipVerify {
			t.Errorf("%s: %+v, %v, %v", mode, cc, preferred, err)
		}
	}
	cc, _, err = BackendTLS{Mode: TLSVerifyIdentity, CA: certFile}.ClientConfig()
	if err != nil || cc.InsecureSkipVerify || cc.RootCAs == nil {
		t.Errorf("verify_identity: %+v, %v", cc, err)
	}

	// Unreadable files: the error names the key.
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		t   TLS
		key string
	}{
		{TLS{Cert: missing, Key: keyFile}, "tls.cert"},
		{TLS{Cert: certFile, Key: missing}, "tls.key"},
		{TLS{Cert: certFile, Key: keyFile, CA: missing}, "tls.ca"},
		{TLS{Cert: keyFile, Key: keyFile}, "tls.cert, tls.key"},
		{TLS{Cert: certFile, Key: keyFile, CA: keyFile}, "tls.ca"},
	} {
		if _, err := tc.t.ServerConfig(); err == nil || !strings.HasPrefix(err.Error(), tc.key) {
			t.Errorf("%+v: error %v does not name %s", tc.t, err, tc.key)
		}
	}
	if _, _, err := (BackendTLS{Mode: TLSVerifyCA, CA: missing}).ClientConfig(); err == nil || !strings.HasPrefix(err.Error(), "backend_tls.ca") {
		t.Errorf("backend ca: %v", err)
	}
}
