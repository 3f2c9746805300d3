// Package wire holds the bytes of the MySQL client/server protocol: packet
// framing, the handshake seen from both sides, OK/ERR/EOF packets and the
// response scanner that relays a backend's answer to a client without
// decoding rows.
//
// Everything that knows the layout of a packet lives here, so the gateway,
// the pools and the owner speak in commands, results and errors.
//
// A *Conn is not safe for concurrent use: one goroutine owns it at a time.
package wire
