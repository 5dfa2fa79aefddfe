// echo.go - Go echo server, the Go peer of goro's echo benchmark
// (bench/echo.sh).
//
//	echo --port P
//
// Listens on 127.0.0.1:P and sends every byte it receives back: one
// goroutine per connection running a plain read/write loop over a 4 KiB
// buffer (what io.Copy does, minus its ReadFrom/WriteTo detours), the
// idiomatic Go server. Worker threads: GOMAXPROCS from the environment
// (Go's default: all CPUs).
//
// Prints one "listening" line to stderr; exits with status 0 on SIGTERM or
// SIGINT.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

const bufSize = 4096 // as the C and goro servers

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, bufSize)
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

// raiseNofile lifts the descriptor limit to the hard limit (Go 1.19 does
// this itself when package os is linked; done here so it holds regardless).
func raiseNofile() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1")
	flag.Int("threads", 0, "ignored: set GOMAXPROCS")
	flag.Parse()
	if *port <= 0 || *port > 65535 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: echo --port P")
		os.Exit(2)
	}
	raiseNofile()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ln.Close()
		os.Exit(0) // open connections close with the process
	}()
	fmt.Fprintf(os.Stderr, "echo: listening on 127.0.0.1:%d, GOMAXPROCS %d\n",
		*port, runtime.GOMAXPROCS(0))
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			select {} // the signal handler closed it and exits
		}
		if err != nil {
			// Out of descriptors and the like: back off, as net/http
			// does, and keep serving the connections there are.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}
