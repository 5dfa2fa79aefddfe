// timers.go - Go's timers, as bench/timers.c measures goro's: lateness by
// the number of pending timers, a ticker among cooperative yielders, and
// the cost of resetting a timer.
//
// Measures:
//   - timers_<N>_p50_late / _p99_late, N = 10^2 .. 10^5: N goroutines sleep
//     N * 10 us each, over and over (a steady 10^5 wake-ups a second);
//     lateness is (time it runs again) - (its deadline).
//   - ticker_p50_late / _p99_late / _max_late: a 1 ms time.Ticker read by
//     one goroutine among 4 that work ~0.5 ms between runtime.Gosched calls,
//     for 2 s; lateness is (time received) - (the time the tick was due).
//   - timer_reset: ns per time.Timer.Reset with 10^4 other timers pending.
//   - timers_idle_cpu: CPU over 5 s with 10^4 goroutines asleep for an hour.
//
// argv[1]: heap, ticker, reset or idle (run.sh runs each with its
// GOMAXPROCS); none: all four.
//
// Output:
//
//	name=timers_<N>_p50_late impl=go value=<us> unit=us  (and _p99_late)
//	name=ticker_p50_late impl=go value=<us> unit=us  (and _p99, _max)
//	name=timer_reset impl=go value=<ns> unit=ns
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	step        = 10 * time.Microsecond
	runFor      = time.Second
	yielders    = 4
	tickSeconds = 2
	resets      = 1000000
	pending     = 10000
)

func quantileUs(v []time.Duration, q float64) float64 {
	k := int(q*float64(len(v)-1) + 0.5)
	return float64(v[k].Nanoseconds()) / 1e3
}

func report(name string, value float64, unit string) {
	fmt.Printf("name=%s impl=go value=%.2f unit=%s\n", name, value, unit)
}

func heapSize(n int) {
	period := time.Duration(n) * step
	per := int(runFor / period)
	if per < 3 {
		per = 3
	}
	late := make([]time.Duration, n*per)
	var wg sync.WaitGroup
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		go func(i int) {
			defer wg.Done()
			mine := late[i*per : (i+1)*per]
			due := start.Add(period * time.Duration(i) / time.Duration(n))
			time.Sleep(time.Until(due))
			for r := 0; r < per; r++ {
				due = due.Add(period)
				time.Sleep(time.Until(due))
				mine[r] = time.Since(due)
			}
		}(i)
	}
	wg.Wait()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	report(fmt.Sprintf("timers_%d_p50_late", n), quantileUs(late, 0.50), "us")
	report(fmt.Sprintf("timers_%d_p99_late", n), quantileUs(late, 0.99), "us")
	if late[0] < 0 {
		fmt.Fprintf(os.Stderr, "timers: a sleep woke %v early\n", -late[0])
		os.Exit(1)
	}
}

func ticker() {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < yielders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				until := time.Now().Add(500 * time.Microsecond)
				for time.Now().Before(until) {
				}
				runtime.Gosched()
			}
		}()
	}
	// A tick carries the time it was sent, not the time it was due (goro's
	// carries the latter): lateness is measured from the schedule, start +
	// k * period, which Go's ticker keeps (it adds the period to when).
	start := time.Now()
	t := time.NewTicker(time.Millisecond)
	n := tickSeconds * 1000
	late := make([]time.Duration, n)
	for i := 0; i < n; i++ {
		tick := <-t.C
		k := tick.Sub(start) / time.Millisecond
		late[i] = time.Since(start.Add(k * time.Millisecond))
	}
	stop.Store(true)
	wg.Wait()
	t.Stop()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	report("ticker_p50_late", quantileUs(late, 0.50), "us")
	report("ticker_p99_late", quantileUs(late, 0.99), "us")
	report("ticker_max_late", quantileUs(late, 1.0), "us")
}

func reset() {
	others := make([]*time.Timer, pending)
	for i := range others {
		others[i] = time.AfterFunc(time.Hour+time.Duration(i)*time.Microsecond, func() {})
	}
	t := time.AfterFunc(time.Hour, func() {})
	best := time.Duration(1 << 62)
	for rep := 0; rep < 3; rep++ {
		t0 := time.Now()
		for i := 0; i < resets; i++ {
			t.Reset(time.Hour + time.Duration(i&1023)*time.Microsecond)
		}
		if d := time.Since(t0); d < best {
			best = d
		}
	}
	report("timer_reset", float64(best.Nanoseconds())/resets, "ns")
	t.Stop()
	for _, o := range others {
		o.Stop()
	}
}

// idle: the process's CPU time over 5 s while 10^4 goroutines sleep an
// hour, in % of one CPU.
func idle() {
	for i := 0; i < 10000; i++ {
		go time.Sleep(time.Hour)
	}
	time.Sleep(time.Second)
	var a, b syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &a)
	t0 := time.Now()
	time.Sleep(5 * time.Second)
	syscall.Getrusage(syscall.RUSAGE_SELF, &b)
	wall := time.Since(t0)
	cpu := time.Duration(b.Utime.Nano() - a.Utime.Nano() + b.Stime.Nano() - a.Stime.Nano())
	fmt.Printf("name=timers_idle_cpu impl=go value=%.4f unit=%%\n", 100*float64(cpu)/float64(wall))
}

func main() {
	part := ""
	if len(os.Args) > 1 {
		part = os.Args[1]
	}
	if part == "" || part == "heap" {
		for n := 100; n <= 100000; n *= 10 {
			heapSize(n)
		}
	}
	if part == "" || part == "ticker" {
		ticker()
	}
	if part == "" || part == "reset" {
		reset()
	}
	if part == "" || part == "idle" {
		idle()
	}
}
