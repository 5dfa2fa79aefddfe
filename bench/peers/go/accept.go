// accept.go - connections per second: net.Listen + net.Dial.
//
// Measures: accept + first echo + close per second on the loopback, as
// bench/accept.c does for goro: a goroutine per accepted connection echoes
// one 64-byte message and closes; 32 client goroutines each loop: Dial
// "127.0.0.1:port", write 64 B, read the echo and the end of file, close.
// 20000 connections per repetition, best of 3 (after a warm-up).
// Workers: GOMAXPROCS from the env.
//
// Output:
//
//	name=accept impl=go value=<connections per second> unit=conn/s
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	clients = 32
	conns   = 20000
	reps    = 3
	msg     = 64
)

func serve(c net.Conn) {
	buf := make([]byte, msg)
	if _, err := io.ReadFull(c, buf); err == nil {
		c.Write(buf)
	}
	c.Close()
}

func client(addr string, left *int64, wg *sync.WaitGroup) {
	defer wg.Done()
	out := make([]byte, msg)
	in := make([]byte, msg+1)
	for atomic.AddInt64(left, -1) >= 0 {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "accept:", err)
			os.Exit(1)
		}
		c.Write(out)
		if n, _ := io.ReadFull(c, in); n != msg {
			fmt.Fprintln(os.Stderr, "accept: no echo")
			os.Exit(1)
		}
		c.Close()
	}
}

func main() {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "accept:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	addr := l.Addr().String()
	best := 0.0
	for r := 0; r <= reps; r++ {
		left := int64(conns)
		if r == 0 {
			left = conns / 10
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		wg.Add(clients)
		for i := 0; i < clients; i++ {
			go client(addr, &left, &wg)
		}
		wg.Wait()
		rate := conns / time.Since(t0).Seconds()
		if r > 0 && rate > best {
			best = rate
		}
	}
	l.Close()
	fmt.Printf("name=accept impl=go value=%.2f unit=conn/s\n", best)
}
