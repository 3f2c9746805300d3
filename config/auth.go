package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Auth configures how clients log in to the gateway.
type Auth struct {
	// DefaultPlugin is the auth plugin the gateway's greeting offers:
	// mysql_native_password (default) or caching_sha2_password. Either
	// way a client may answer with the other one, and the gateway checks
	// what it answered; clients offering neither are switched to
	// mysql_native_password.
	DefaultPlugin string `yaml:"default_plugin"`
	// RSAPrivateKey is a PEM file (PKCS #1 or PKCS #8) holding the RSA key
	// caching_sha2_password clients on plain TCP encrypt their password
	// for. Empty: a 2048-bit key is generated at start, so clients that
	// pin the key (serverPubKey, --server-public-key-path) must fetch it
	// again after a restart.
	RSAPrivateKey string `yaml:"rsa_private_key"`
}

// Greeting plugin names, as config.Auth.DefaultPlugin takes them.
const (
	authNative = "mysql_native_password"
	authSha2   = "caching_sha2_password"
)

// GreetingPlugin is DefaultPlugin with its default applied.
func (a Auth) GreetingPlugin() string {
	if a.DefaultPlugin == "" {
		return authNative
	}
	return a.DefaultPlugin
}

// LoadRSAKey reads RSAPrivateKey; nil when it is not set.
func (a Auth) LoadRSAKey() (*rsa.PrivateKey, error) {
	if a.RSAPrivateKey == "" {
		return nil, nil
	}
	b, err := os.ReadFile(a.RSAPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("auth.rsa_private_key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("auth.rsa_private_key: no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("auth.rsa_private_key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth.rsa_private_key: a %T, not an RSA key", k)
	}
	return rk, nil
}

func (a Auth) validate(k string, bad func(key, format string, args ...any)) {
	switch a.DefaultPlugin {
	case "", authNative, authSha2:
	default:
		bad(k+".default_plugin", "%q is neither %s nor %s", a.DefaultPlugin, authNative, authSha2)
	}
	if a.RSAPrivateKey != "" {
		if _, err := a.LoadRSAKey(); err != nil {
			bad(k+".rsa_private_key", "%v", err)
		}
	}
}
