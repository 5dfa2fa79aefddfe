// spawn.go - goroutine spawn cost.
//
// Measures: ns per goroutine for go + run + exit of a trivial goroutine,
// waited for with a sync.WaitGroup in batches of 1000 (spawn 1000, wait,
// repeat). Comparable to goro's spawn benchmark (create + run + exit + join
// of trivial coroutines in batches). Respects GOMAXPROCS from the env.
// Best (minimum) of 5 repetitions.
//
// Output:
//
//	name=spawn impl=go value=<ns> unit=ns
package main

import (
	"fmt"
	"sync"
	"time"
)

const (
	batch   = 1000
	batches = 500 // 5e5 goroutines per repetition
	reps    = 5
)

var sink [batch]int

func run(nb int) {
	var wg sync.WaitGroup
	for b := 0; b < nb; b++ {
		wg.Add(batch)
		for i := 0; i < batch; i++ {
			go func(i int) {
				sink[i] = i
				wg.Done()
			}(i)
		}
		wg.Wait()
	}
}

func main() {
	run(10) // warm-up
	best := 1e300
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		run(batches)
		ns := float64(time.Since(t0).Nanoseconds()) / (batch * batches)
		if ns < best {
			best = ns
		}
	}
	fmt.Printf("name=spawn impl=go value=%.2f unit=ns\n", best)
}
