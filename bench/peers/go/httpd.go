// httpd.go - Go's net/http FileServer, the Go peer of samples/httpd
// (bench/httpd.sh).
//
//	httpd --port P --root DIR
//
// Serves DIR on 127.0.0.1:P with http.FileServer, as a Go programmer
// would: keep-alive, Last-Modified and 304, ranges, sendfile for regular
// files. Worker threads: GOMAXPROCS from the environment. No access log.
//
// Prints one "listening" line to stderr.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	port := flag.Int("port", 8080, "TCP port")
	root := flag.String("root", ".", "directory served")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "httpd (go): listening on port %d\n", *port)
	if err := http.Serve(ln, http.FileServer(http.Dir(*root))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
