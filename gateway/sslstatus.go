package gateway

import (
	"crypto/tls"
	"errors"
	"strconv"
	"strings"

	"github.com/directgate/directgate/internal/mysqlserver"
	"github.com/directgate/directgate/querypath"
	"github.com/directgate/directgate/wire"
)

// maxStatusRows bounds the answer to SHOW SESSION STATUS that the gateway
// keeps to rewrite (MariaDB 10.11 has about 600 status variables).
const maxStatusRows = 5000

// showSessionStatus runs SHOW [SESSION] STATUS ... on a backend connection
// and answers it with the values that describe the client's own
// connection (Ssl_cipher, Ssl_version, ...) taken from the client side:
// the backend's describe the gateway's connection to it. The answer is
// small and kept whole to be rewritten.
func (ss *Session) showSessionStatus(p []byte, route querypath.Route) error {
	sp := startStatement(ss.now)
	defer ss.srv.metrics.endStatement(&sp)
	conn, err := ss.backend(route, "", false)
	if err != nil {
		sp.failed(err)
		return ss.writeErr(toClientError(err))
	}
	raw, err := conn.QueryRaw(p, maxStatusRows)
	var res wire.Result
	var sqlErr *wire.SQLError
	switch {
	case errors.As(err, &sqlErr):
		res.Err = sqlErr
		if werr := ss.writeErr(sqlErr); werr != nil {
			ss.dropLease()
			return werr
		}
	case errors.Is(err, wire.ErrResultTooLarge):
		res.Err = wire.NewError(mysqlserver.ErUnknownError, "HY000", "SHOW STATUS answered more than %d rows", maxStatusRows)
		if werr := ss.writeErr(res.Err); werr != nil {
			ss.dropLease()
			return werr
		}
	case err != nil:
		return ss.statementFailed(conn, wire.Result{}, err)
	default:
		res = wire.Result{Status: raw.Status, Warnings: raw.Warnings}
		if raw.OK != nil {
			res.OK = *raw.OK
			err = ss.writeOK(*raw.OK)
		} else {
			res.HadResultSet, res.Rows = true, uint64(len(raw.Rows))
			err = ss.writeStatusRows(raw)
		}
		if err != nil {
			ss.dropLease()
			return err
		}
	}
	sp.served(ss.leaseRole, res, nil)
	return ss.afterStatement(conn, route, res, p[1:])
}

// writeStatusRows writes a SHOW STATUS answer with the client
// connection's own values in place of the backend's, and the gateway's
// count of client connections as Threads_connected (the backend's counts
// the pooled connections: tests and tools that wait for sessions to go,
// as mysql-test's wait_until_count_sessions.inc, compare it).
func (ss *Session) writeStatusRows(raw *wire.RawResult) error {
	own := clientSSLStatus(ss.client.TLS(), ss.srv.tls.Load())
	own["threads_connected"] = strconv.Itoa(ss.srv.front.Len())
	w := wire.ResultWriter{Conn: ss.client, Caps: ss.caps, Status: raw.Status}
	if err := w.RawColumns(raw.Defs); err != nil {
		return err
	}
	for _, row := range raw.Rows {
		name, _, ok := wire.ReadLenEncString(row)
		if ok && len(raw.Defs) == 2 {
			if v, mine := own[strings.ToLower(string(name))]; mine {
				if err := w.Row([][]byte{name, []byte(v)}); err != nil {
					return err
				}
				continue
			}
		}
		if err := ss.client.WritePacket(row); err != nil {
			return err
		}
	}
	if err := w.End(raw.Warnings); err != nil {
		return err
	}
	return ss.client.Flush()
}

// clientSSLStatus returns the session status variables that describe the
// client's connection to the gateway, by lower-case name, as MariaDB
// would give them for that connection: empty for a plain one.
func clientSSLStatus(tc *tls.Conn, ct *clientTLS) map[string]string {
	m := map[string]string{
		"ssl_cipher": "", "ssl_version": "", "ssl_cipher_list": "", "ssl_sessions_reused": "0",
		"ssl_server_not_before": "", "ssl_server_not_after": "", "ssl_verify_mode": "0", "ssl_verify_depth": "0",
		"ssl_default_timeout": "0",
	}
	if tc == nil {
		return m
	}
	st := tc.ConnectionState()
	m["ssl_cipher"] = opensslCipherName(st.CipherSuite)
	m["ssl_version"] = tlsVersionName(st.Version)
	if st.DidResume {
		m["ssl_sessions_reused"] = "1"
	}
	var names []string
	for _, cs := range tls.CipherSuites() {
		names = append(names, opensslCipherName(cs.ID))
	}
	m["ssl_cipher_list"] = strings.Join(names, ":")
	if ct != nil && ct.conf != nil && len(ct.conf.Certificates) > 0 {
		if leaf := ct.conf.Certificates[0].Leaf; leaf != nil {
			// OpenSSL's ASN1_TIME_print form, as MariaDB shows it.
			m["ssl_server_not_before"] = leaf.NotBefore.UTC().Format("Jan _2 15:04:05 2006 GMT")
			m["ssl_server_not_after"] = leaf.NotAfter.UTC().Format("Jan _2 15:04:05 2006 GMT")
		}
	}
	return m
}

// tlsVersionName is the version as OpenSSL names it (Ssl_version).
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1"
	}
	return ""
}

// opensslCipherName is a cipher suite as OpenSSL (and so MariaDB's
// Ssl_cipher) names it; TLS 1.3 suites keep their IANA names.
func opensslCipherName(id uint16) string {
	switch id {
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:
		return "ECDHE-ECDSA-AES128-GCM-SHA256"
	case tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:
		return "ECDHE-RSA-AES128-GCM-SHA256"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:
		return "ECDHE-ECDSA-AES256-GCM-SHA384"
	case tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:
		return "ECDHE-RSA-AES256-GCM-SHA384"
	case tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256:
		return "ECDHE-ECDSA-CHACHA20-POLY1305"
	case tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
		return "ECDHE-RSA-CHACHA20-POLY1305"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:
		return "ECDHE-ECDSA-AES128-SHA"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:
		return "ECDHE-ECDSA-AES256-SHA"
	case tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA:
		return "ECDHE-RSA-AES128-SHA"
	case tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA:
		return "ECDHE-RSA-AES256-SHA"
	case tls.TLS_RSA_WITH_AES_128_GCM_SHA256:
		return "AES128-GCM-SHA256"
	case tls.TLS_RSA_WITH_AES_256_GCM_SHA384:
		return "AES256-GCM-SHA384"
	case tls.TLS_RSA_WITH_AES_128_CBC_SHA:
		return "AES128-SHA"
	case tls.TLS_RSA_WITH_AES_256_CBC_SHA:
		return "AES256-SHA"
	}
	return tls.CipherSuiteName(id)
}
