// Package mysqlserver is the MySQL server skeleton the gateway and the
// owner share: the listener and its accept loop, connection ids, the
// registry of live connections, the command loop, the drain-then-cut
// shutdown, and the errors every MySQL front end of this project sends the
// same way.
//
// What a connection does (its handshake, its commands) belongs to the
// Handler: the gateway's sessions and the owner's sessions are two
// handlers of one Server.
//
//	srv := mysqlserver.New(handler, log)
//	if err := srv.Listen("127.0.0.1:3306"); err != nil { ... }
//	go srv.Serve()
//	...
//	cut, err := srv.Shutdown(ctx) // idle connections close at once, busy ones finish until ctx ends
package mysqlserver
