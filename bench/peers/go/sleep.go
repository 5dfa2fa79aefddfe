// sleep.go - timer lateness with many sleeping goroutines.
//
// Measures: how late time.Sleep wakes a goroutine. 10^4 goroutines each
// sleep 1 ms, rounds times in a row; every wake-up records its lateness,
// (time it runs again) - (time it went to sleep + 1 ms), and the figures
// are the median, 99th percentile and maximum over all 2 * 10^5 sleeps.
// A first, unrecorded sleep of i/N ms spreads the goroutines over the
// millisecond, so the wake-ups are due in a steady stream rather than in
// one burst per round. That stream is 10^7 wake-ups a second, more than a
// few CPUs serve easily: the tail figures show how wake-ups queue when the
// workers fall behind. Comparable to goro's sleep benchmark (bench/sleep.c,
// goro_sleep). Single measurement (it is a distribution already). A sleep
// that ends before its deadline fails the program (after the figures).
// Workers: GOMAXPROCS from the env.
//
// Output:
//
//	name=sleep_p50_late impl=go value=<us> unit=us
//	name=sleep_p99_late impl=go value=<us> unit=us
//	name=sleep_max_late impl=go value=<us> unit=us
package main

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

const (
	n      = 10000
	rounds = 20
)

// sleeper i fills its own slice of late: no sharing.
func sleeper(i int, late []time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	time.Sleep(time.Millisecond * time.Duration(i) / n)
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		late[r] = time.Since(t0) - time.Millisecond
	}
}

// quantileUs is the q-quantile (0 <= q <= 1) of sorted v, in microseconds.
func quantileUs(v []time.Duration, q float64) float64 {
	k := int(q*float64(len(v)-1) + 0.5)
	return float64(v[k].Nanoseconds()) / 1e3
}

func main() {
	late := make([]time.Duration, n*rounds)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go sleeper(i, late[i*rounds:(i+1)*rounds], &wg)
	}
	wg.Wait()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	for _, f := range []struct {
		name string
		q    float64
	}{{"sleep_p50_late", 0.50}, {"sleep_p99_late", 0.99}, {"sleep_max_late", 1.0}} {
		fmt.Printf("name=%s impl=go value=%.2f unit=us\n", f.name, quantileUs(late, f.q))
	}
	// A sleep that ends before its deadline is a wrong result, not a fast
	// one: report the figures, then fail.
	if late[0] < 0 {
		early := sort.Search(len(late), func(i int) bool { return late[i] >= 0 })
		fmt.Fprintf(os.Stderr, "sleep: %d of %d sleeps woke early, the earliest by %v\n",
			early, len(late), -late[0])
		os.Exit(1)
	}
}
