// group.go - Go's peer of bench/group.c: a group of goroutines in the shape
// of golang.org/x/sync/errgroup (a WaitGroup, the first error kept once,
// a context cancelled on it), written on the standard library alone so
// that the peer builds without modules. A member stores one int and
// returns nil.
//
// group_member: ns per member for spawn into the group + run + the group's
//
//	wait, 1000 members per group (new group, 1000 spawns, wait), best of
//	5 repetitions of 5e5 members; GOMAXPROCS 1, as bench/group runs
//	goro on one worker.
//
// group_cancel: ns per member to cancel a group of 10^5 members blocked on
//
//	the group's context (with a one-hour timer beside it, as goro's
//	members sleep for an hour) and wait until every member has returned;
//	best of 3; GOMAXPROCS 2, as goro's two workers.
//
// Output:
//
//	name=group_member impl=go value=<ns> unit=ns
//	name=group_cancel impl=go value=<ns> unit=ns
package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

const (
	batch      = 1000
	batches    = 500
	reps       = 5
	parked     = 100000
	cancelReps = 3
)

// group: errgroup's contract - Go runs f in a goroutine, Wait waits for
// all and returns the first error; the first error cancels ctx.
type group struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func newGroup(parent context.Context) (*group, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	return &group{cancel: cancel}, ctx
}

func (g *group) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.once.Do(func() {
				g.err = err
				g.cancel()
			})
		}
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}

var sink [batch]int

func members() float64 {
	best := 1e300
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		for b := 0; b < batches; b++ {
			g, _ := newGroup(context.Background())
			for i := 0; i < batch; i++ {
				i := i
				g.Go(func() error {
					sink[i] = i
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				panic(err)
			}
		}
		ns := float64(time.Since(t0).Nanoseconds()) / (batch * batches)
		if ns < best {
			best = ns
		}
	}
	return best
}

func cancelParked() float64 {
	best := 1e300
	for r := 0; r < cancelReps; r++ {
		g, ctx := newGroup(context.Background())
		for i := 0; i < parked; i++ {
			g.Go(func() error {
				t := time.NewTimer(time.Hour)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
					return nil
				}
			})
		}
		time.Sleep(20 * time.Millisecond) // every member blocked
		t0 := time.Now()
		g.cancel()
		err := g.Wait()
		ns := float64(time.Since(t0).Nanoseconds()) / parked
		if err != context.Canceled {
			panic(fmt.Sprintf("group_cancel: the wait returned %v, want context.Canceled", err))
		}
		if ns < best {
			best = ns
		}
	}
	return best
}

func main() {
	sink[0] = 1
	runtime.GOMAXPROCS(1)
	fmt.Printf("name=group_member impl=go value=%.2f unit=ns\n", members())
	runtime.GOMAXPROCS(2)
	fmt.Printf("name=group_cancel impl=go value=%.2f unit=ns\n", cancelParked())
}
