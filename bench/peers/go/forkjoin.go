// forkjoin.go - fork-join tree of ~1 us leaves.
//
// Measures: wall time in ms of a binary fork-join over 2^20 leaves; each
// internal node runs its left half in a new goroutine and its right half
// inline, then joins (sync.WaitGroup) and adds the two results. Each leaf
// does ~1 us of busy integer work: xorshift64 iterations, the iteration count
// calibrated once at startup (best of 5 timings of a long run) so one leaf
// takes ~1 us. Ideal time is 2^20 us / workers (~1049 ms / GOMAXPROCS).
// Comparable to goro's fork-join benchmark (same tree shape, same leaf work
// and calibration), on GOMAXPROCS workers from the env (default: number of
// CPUs). Best (minimum) of 2 runs (each run is ~1 s of work).
//
// Output:
//
//	name=forkjoin impl=go value=<ms> unit=ms
//	name=forkjoin_workers impl=go value=<GOMAXPROCS> unit=count
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

const (
	depth = 20 // 2^20 leaves
	reps  = 2
)

var leafIters int

// work runs n xorshift64 steps from seed; the result is used, so the loop
// cannot be eliminated.
func work(seed uint64, n int) uint64 {
	x := seed | 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

func calibrate() int {
	const n = 5000000
	best := 1e300
	var sink uint64
	for r := 0; r < 5; r++ {
		t0 := time.Now()
		sink += work(uint64(r)+1, n)
		ns := float64(time.Since(t0).Nanoseconds())
		if ns < best {
			best = ns
		}
	}
	if sink == 0 {
		fmt.Fprintln(os.Stderr, "forkjoin: unexpected zero")
	}
	it := int(float64(n) * 1000 / best) // iterations per 1000 ns
	if it < 1 {
		it = 1
	}
	return it
}

// fj returns the number of leaves whose work result was non-zero (xorshift
// never maps a non-zero state to zero, so this must equal 2^d).
func fj(d int, seed uint64) uint64 {
	if d == 0 {
		if work(seed, leafIters) != 0 {
			return 1
		}
		return 0
	}
	var left uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		left = fj(d-1, 2*seed)
		wg.Done()
	}()
	right := fj(d-1, 2*seed+1)
	wg.Wait()
	return left + right
}

func main() {
	leafIters = calibrate()
	best := time.Duration(1 << 62)
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		n := fj(depth, 1)
		d := time.Since(t0)
		if n != 1<<depth {
			fmt.Fprintf(os.Stderr, "forkjoin: got %d leaves, want %d\n", n, 1<<depth)
			os.Exit(1)
		}
		if d < best {
			best = d
		}
	}
	fmt.Printf("name=forkjoin impl=go value=%.2f unit=ms\n", float64(best.Nanoseconds())/1e6)
	fmt.Printf("name=forkjoin_workers impl=go value=%d unit=count\n", runtime.GOMAXPROCS(0))
}
