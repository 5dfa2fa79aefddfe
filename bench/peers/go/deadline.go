// deadline.go - the periodic tasks of goro's deadline benchmark
// (bench/deadline.c) as goroutines: 8 tasks (periods 1-20 ms, deadline =
// period, 90% of their runtime in CPU time), 4 CPU-bound spinners and
// ECHO_PAIRS echo pairs over socket pairs, for DL_SECONDS (default 10).
// Go has no deadline class: each task sleeps until its next release.
// GOMAXPROCS from the env (run.sh: 2).
//
// Output:
//
//	name=dl_normal_misses impl=go value=<n> unit=jobs
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var taskUs = [8][2]int64{
	{200, 1000}, {500, 2000}, {1000, 4000}, {1000, 5000},
	{2000, 10000}, {3000, 10000}, {4000, 20000}, {2000, 20000},
}

var (
	stop       atomic.Bool
	misses     atomic.Int64
	itersPerNs float64
	sink       atomic.Int64
)

// cpuNs is this thread's CPU clock (CLOCK_THREAD_CPUTIME_ID).
func cpuNs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

const chunkNs = 20000

// work uses ns of CPU time, counted as bench/deadline.c counts it: chunks
// of at most 20 us of the thread's CPU clock; one a goroutine was moved or
// switched out in reads below 0 or above 4 chunks and counts as what it
// was meant to take.
func work(ns int64) {
	var x int64
	a := cpuNs()
	for done := int64(0); done < ns; {
		want := ns - done
		if want > chunkNs {
			want = chunkNs
		}
		n := int64(itersPerNs * float64(want))
		for i := int64(0); i < n; i++ {
			x += i ^ (x >> 3)
		}
		b := cpuNs()
		d := b - a
		a = b
		if d < 0 || d > 4*chunkNs {
			d = want
		}
		done += d
	}
	sink.Add(x & 1)
}

func calibrate() {
	n := int64(50000000)
	t := time.Now()
	var x int64
	for i := int64(0); i < n; i++ {
		x += i ^ (x >> 3)
	}
	sink.Add(x & 1)
	itersPerNs = float64(n) / float64(time.Since(t).Nanoseconds())
}

func periodic(runtimeNs, periodNs int64, wg *sync.WaitGroup) {
	defer wg.Done()
	release := time.Now()
	for !stop.Load() {
		work(runtimeNs * 9 / 10)
		if time.Since(release) > time.Duration(periodNs) {
			misses.Add(1)
		}
		release = release.Add(time.Duration(periodNs))
		if d := time.Until(release); d > 0 {
			time.Sleep(d)
		} else {
			release = time.Now()
		}
	}
}

func pair() (net.Conn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "socketpair:", err)
		os.Exit(1)
	}
	a, _ := net.FileConn(os.NewFile(uintptr(fds[0]), "a"))
	b, _ := net.FileConn(os.NewFile(uintptr(fds[1]), "b"))
	syscall.Close(fds[0])
	syscall.Close(fds[1])
	return a, b
}

func main() {
	seconds := 10.0
	if s := os.Getenv("DL_SECONDS"); s != "" {
		seconds, _ = strconv.ParseFloat(s, 64)
	}
	pairs := 1000
	if s := os.Getenv("ECHO_PAIRS"); s != "" {
		pairs, _ = strconv.Atoi(s)
	}
	calibrate()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				work(100000)
			}
		}()
	}
	var conns []net.Conn
	for i := 0; i < pairs; i++ {
		a, b := pair()
		conns = append(conns, a, b)
		go func() {
			buf := make([]byte, 64)
			for {
				n, err := a.Read(buf)
				if err != nil {
					return
				}
				if _, err := a.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for !stop.Load() {
				if _, err := b.Write(buf); err != nil {
					return
				}
				got := 0
				for got < 16 {
					n, err := b.Read(buf[got:])
					if err != nil {
						return
					}
					got += n
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	for _, t := range taskUs {
		wg.Add(1)
		go periodic(t[0]*1000, t[1]*1000, &wg)
	}
	time.Sleep(time.Duration(seconds * float64(time.Second)))
	stop.Store(true)
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	fmt.Printf("name=dl_normal_misses impl=go value=%d.00 unit=jobs\n", misses.Load())
}
