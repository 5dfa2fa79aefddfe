// preempt.go - what preemption costs CPU-bound goroutines, and what it buys
// a goroutine that wants to run on time.
//
// Measures, with nspin spinners per P (goroutines in a loop without a call,
// which only asynchronous preemption can interrupt):
//   - throughput: each spinner does work iterations of a dependent
//     multiply-add chain; the figure is the wall time until all are done,
//     with preemption (preempt_work_on) and without (preempt_work_off: the
//     program runs itself again with GODEBUG=asyncpreemptoff=1 for each of
//     those runs). Runs alternate, best of reps each;
//   - latency: one more goroutine sleeps 1 ms in a loop (time.Sleep) among
//     spinners that run until the end, for tickSeconds; the figures are
//     the median, 99th percentile and maximum lateness.
//
// Comparable to goro's preempt benchmark (bench/preempt.c). Workers:
// GOMAXPROCS from the env.
//
// Output:
//
//	name=preempt_work_on impl=go value=<ms> unit=ms
//	name=preempt_work_off impl=go value=<ms> unit=ms
//	name=preempt_tick_p50_late impl=go value=<us> unit=us
//	name=preempt_tick_p99_late impl=go value=<us> unit=us
//	name=preempt_tick_max_late impl=go value=<us> unit=us
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	nspin       = 4       // spinners per P
	work        = 1 << 27 // iterations per spinner
	reps        = 3
	tickSeconds = 3
	childEnv    = "GORO_BENCH_PREEMPT_CHILD"
)

var sink uint64

// spin is the work: each step depends on the last, and the loop calls
// nothing, so it has no cooperative preemption point.
func spin(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// timeWork is the wall time of nspin * GOMAXPROCS spinners doing their work.
func timeWork() time.Duration {
	n := nspin * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	wg.Add(n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddUint64(&sink, spin(work))
			wg.Done()
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

// timeWorkOff runs timeWork in a child process without async preemption.
func timeWorkOff() time.Duration {
	self, err := os.Executable()
	if err != nil {
		fail("preempt: %v", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", childEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		fail("preempt: child run: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		fail("preempt: child said %q", out)
	}
	return time.Duration(ns)
}

// ticks measures the lateness of 1 ms sleeps among spinners.
func ticks() []time.Duration {
	n := nspin * runtime.GOMAXPROCS(0)
	var stop int32
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			x := uint64(0)
			for atomic.LoadInt32(&stop) == 0 {
				x ^= spin(1 << 16)
			}
			atomic.AddUint64(&sink, x)
			wg.Done()
		}()
	}
	var late []time.Duration
	end := time.Now().Add(tickSeconds * time.Second)
	for time.Now().Before(end) {
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		late = append(late, time.Since(t0)-time.Millisecond)
	}
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	return late
}

// quantileUs is the q-quantile (0 <= q <= 1) of sorted v, in microseconds.
func quantileUs(v []time.Duration, q float64) float64 {
	k := int(q*float64(len(v)-1) + 0.5)
	return float64(v[k].Nanoseconds()) / 1e3
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func report(name string, value float64, unit string) {
	fmt.Printf("name=%s impl=go value=%.2f unit=%s\n", name, value, unit)
}

func main() {
	if os.Getenv(childEnv) != "" {
		fmt.Println(timeWork().Nanoseconds())
		return
	}
	on, off := time.Duration(1<<62), time.Duration(1<<62)
	for r := 0; r < reps; r++ {
		if t := timeWork(); t < on {
			on = t
		}
		if t := timeWorkOff(); t < off {
			off = t
		}
	}
	report("preempt_work_on", float64(on.Nanoseconds())/1e6, "ms")
	report("preempt_work_off", float64(off.Nanoseconds())/1e6, "ms")

	late := ticks()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	report("preempt_tick_p50_late", quantileUs(late, 0.50), "us")
	report("preempt_tick_p99_late", quantileUs(late, 0.99), "us")
	report("preempt_tick_max_late", quantileUs(late, 1.0), "us")
}
