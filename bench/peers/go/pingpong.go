// pingpong.go - Go unbuffered-channel ping-pong.
//
// Measures: ns per one-way hand-off between two goroutines that bounce a
// value over two unbuffered channels (ping: A->B, pong: B->A); a round trip
// is two hand-offs. Comparable to goro's channel ping-pong benchmark: each
// hand-off is a blocking send meeting a parked receiver, i.e. a channel
// operation plus a scheduler switch. Respects GOMAXPROCS from the env (with
// 1 worker it is a pure same-thread switch; with more it may cross threads).
// Best (minimum) of 5 repetitions.
//
// Output:
//
//	name=chan_pingpong impl=go value=<ns> unit=ns
package main

import (
	"fmt"
	"time"
)

const (
	roundTrips = 300000 // 6e5 hand-offs per repetition
	reps       = 5
)

func main() {
	ping := make(chan int)
	pong := make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()

	run := func(n int) {
		v := 0
		for i := 0; i < n; i++ {
			ping <- v
			v = <-pong
		}
		if v != n {
			panic("pingpong: lost messages")
		}
	}

	run(10000) // warm-up
	best := 1e300
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		run(roundTrips)
		ns := float64(time.Since(t0).Nanoseconds()) / (2 * roundTrips)
		if ns < best {
			best = ns
		}
	}
	close(ping)
	<-pong
	fmt.Printf("name=chan_pingpong impl=go value=%.2f unit=ns\n", best)
}
