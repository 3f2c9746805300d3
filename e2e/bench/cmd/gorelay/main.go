// Command gorelay is the floor a Go proxy cannot go below with
// goroutine-per-direction I/O: a TCP relay that, for every accepted client,
// dials the backend and copies bytes both ways with io.Copy in two
// goroutines, closing both connections when either side ends. It parses
// nothing, pools nothing and routes nothing, so a MySQL gateway written in
// Go pays at least what gorelay pays per round trip. `make bench` (sbbench)
// runs it as the "gorelay" target in front of the MariaDB primary.
//
// Usage: gorelay -listen 127.0.0.1:PORT -backend 127.0.0.1:PORT
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"sync"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3307", "address to accept clients on")
	backend := flag.String("backend", "127.0.0.1:3306", "address to relay every client to")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	for {
		client, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go relay(client, *backend)
	}
}

// relay copies between client and a new connection to backend until either
// side ends, then closes both.
func relay(client net.Conn, backend string) {
	server, err := net.Dial("tcp", backend)
	if err != nil {
		log.Print(err)
		client.Close()
		return
	}
	var once sync.Once
	closeBoth := func() { client.Close(); server.Close() }
	go func() {
		_, _ = io.Copy(server, client)
		once.Do(closeBoth)
	}()
	_, _ = io.Copy(client, server)
	once.Do(closeBoth)
}
