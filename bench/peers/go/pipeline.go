// pipeline.go - the jobs of bench/pipeline.c as Go programs write them: a
// goroutine per stage joined by buffered channels (capacity 64), a source
// goroutine, the sink in main. GOMAXPROCS=2 is set here.
//
// Output (best of 3; ms):
//
//	name=pipeline_balanced_stages impl=go value=<ms> unit=ms
//	name=pipeline_moving_stages impl=go value=<ms> unit=ms
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

const (
	n     = 30000
	bal   = 2000
	light = 600
	heavy = 6000
	reps  = 3
)

type item struct{ n, v uint64 }

func rounds(x uint64, k int) uint64 {
	for i := 0; i < k; i++ {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		x = z ^ (z >> 31)
	}
	return x
}

func cost(moving bool, stage int, i uint64) int {
	if !moving {
		return bal
	}
	h := 0
	if i >= n/2 {
		h = 2
	}
	if stage == h {
		return heavy
	}
	return light
}

func run(moving bool) uint64 {
	items := make([]item, n)
	var chans [4]chan *item
	for i := range chans {
		chans[i] = make(chan *item, 64)
	}
	go func() {
		for i := 0; i < n; i++ {
			items[i] = item{uint64(i), uint64(i)}
			chans[0] <- &items[i]
		}
		close(chans[0])
	}()
	for s := 0; s < 3; s++ {
		go func(s int) {
			for it := range chans[s] {
				it.v = rounds(it.v+uint64(s), cost(moving, s, it.n))
				chans[s+1] <- it
			}
			close(chans[s+1])
		}(s)
	}
	var x uint64
	count := 0
	for it := range chans[3] {
		x ^= it.v*0x9e3779b97f4a7c15 + it.n
		count++
	}
	if count != n {
		fmt.Fprintf(os.Stderr, "pipeline: %d items\n", count)
		os.Exit(1)
	}
	return x
}

func main() {
	runtime.GOMAXPROCS(2)
	for _, job := range []string{"balanced", "moving"} {
		best := 1e300
		for r := 0; r < reps; r++ {
			t0 := time.Now()
			run(job == "moving")
			ms := float64(time.Since(t0).Nanoseconds()) / 1e6
			if ms < best {
				best = ms
			}
		}
		fmt.Printf("name=pipeline_%s_stages impl=go value=%.2f unit=ms\n", job, best)
	}
}
