// skynet.go - the skynet benchmark (https://github.com/atemerev/skynet).
//
// Measures: wall time in ms to build a 10-ary tree of goroutines with
// 1,000,000 leaves (1,111,111 goroutines in total); each node spawns its 10
// children, which report back over a channel; leaves send their id and each
// node sums what it receives. The root total must be 499999500000.
// Comparable to goro's skynet benchmark (same tree, same channel-based
// reduction), with Go's scheduler on GOMAXPROCS workers (env, default: number
// of CPUs). Best (minimum) of 3 runs.
//
// Output:
//
//	name=skynet impl=go value=<ms> unit=ms
//	name=skynet_workers impl=go value=<GOMAXPROCS> unit=count
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

const (
	leaves = 1000000
	div    = 10
	reps   = 3
	want   = int64(499999500000)
)

func skynet(c chan<- int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	sub := size / div
	for i := int64(0); i < div; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	best := time.Duration(1 << 62)
	for r := 0; r < reps; r++ {
		c := make(chan int64)
		t0 := time.Now()
		go skynet(c, 0, leaves)
		sum := <-c
		d := time.Since(t0)
		if sum != want {
			fmt.Fprintf(os.Stderr, "skynet: wrong sum %d, want %d\n", sum, want)
			os.Exit(1)
		}
		if d < best {
			best = d
		}
	}
	fmt.Printf("name=skynet impl=go value=%.2f unit=ms\n", float64(best.Nanoseconds())/1e6)
	fmt.Printf("name=skynet_workers impl=go value=%d unit=count\n", runtime.GOMAXPROCS(0))
}
