// yield.go - Go runtime.Gosched() cost.
//
// Measures: ns per runtime.Gosched() with two goroutines yielding to each
// other in a loop on a single worker (runtime.GOMAXPROCS(1) is set here,
// regardless of the env). Each Gosched puts the caller on the global run
// queue and switches to the other goroutine. Comparable to goro's yield
// benchmark (two coroutines yielding on one worker). Time is divided by the
// total number of Gosched calls made by both goroutines. Best (minimum) of 5
// repetitions.
//
// Output:
//
//	name=yield impl=go value=<ns> unit=ns
package main

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

const (
	perG = 1000000 // Gosched calls per goroutine per repetition
	reps = 5
)

func run(n int) {
	var wg sync.WaitGroup
	wg.Add(2)
	for g := 0; g < 2; g++ {
		go func() {
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
}

func main() {
	runtime.GOMAXPROCS(1)
	run(10000) // warm-up
	best := 1e300
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		run(perG)
		ns := float64(time.Since(t0).Nanoseconds()) / (2 * perG)
		if ns < best {
			best = ns
		}
	}
	fmt.Printf("name=yield impl=go value=%.2f unit=ns\n", best)
}
