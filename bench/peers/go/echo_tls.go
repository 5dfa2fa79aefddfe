// echo_tls.go - Go TLS echo server, the Go peer of goro's TLS benchmark
// (bench/tls.sh).
//
//	echo_tls --port P --cert CERT --key KEY
//
// Listens on 127.0.0.1:P with crypto/tls (TLS 1.2 at least, Go's
// defaults otherwise) and sends every byte it receives back: one goroutine
// per connection, a read/write loop over a 16 KiB buffer (one TLS record),
// as echod --tls. GOMAXPROCS from the environment. Prints one "listening"
// line to stderr; exits with status 0 on SIGTERM or SIGINT.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16384)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1")
	certFile := flag.String("cert", "", "certificate (PEM)")
	keyFile := flag.String("key", "", "private key (PEM)")
	flag.Parse()
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil || *port <= 0 {
		fmt.Fprintln(os.Stderr, "echo_tls: --port, --cert, --key:", err)
		os.Exit(2)
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ln, err := tls.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo_tls:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "echo_tls: listening on 127.0.0.1 port %d\n", *port)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go serve(c)
	}
}
