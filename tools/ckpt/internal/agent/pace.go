package agent

import (
	"context"
	"sync"
	"time"
)

// RatePacer returns a Pace function that keeps this agent's replication
// traffic (all destinations together) under rate bytes per second: a
// token bucket one chunk deep.
func RatePacer(rate float64) func(ctx context.Context, dest int, offset, size int64) error {
	var mu sync.Mutex
	next := time.Now()
	return func(ctx context.Context, _ int, _, size int64) error {
		mu.Lock()
		now := time.Now()
		if next.Before(now) {
			next = now
		}
		at := next
		next = next.Add(time.Duration(float64(size) / rate * float64(time.Second)))
		mu.Unlock()
		return sleepUntil(ctx, at)
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
