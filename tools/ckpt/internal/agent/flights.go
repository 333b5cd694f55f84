package agent

import "sync"

// shardKey names one shard of one attempt of an iteration.
type shardKey struct {
	owner       int
	iter, epoch int64
}

// flights keeps one copy of a shard from the peers in flight at a time. A
// replacement agent's heal and its trainer's restore both want the rank's
// own shard the moment it starts; two copies would share the link and
// each would take twice as long (bench/ckpt/restore.sh measured the
// restore at a third of the link rate).
type flights struct {
	mu   sync.Mutex
	m    map[shardKey]*flight
	from map[shardKey]int // the rank a finished fetch copied k from
}

// flight is one fetch in progress: done is closed when it ends, and land
// says where its bytes land and how many have arrived, so that a restore
// waiting for it can hand them to its trainer as they come (streamed
// restores).
type flight struct {
	done chan struct{}
	land *landing
}

// claim makes the caller the one fetching k, with release to call when
// done (with the rank it copied k from, or −1) and the landing its fetch
// reports to, or, when another fetch of k is in flight, returns that
// fetch's landing and a channel closed when it ends (the caller then looks
// in the store and, if the shard is not there, claims again).
func (f *flights) claim(k shardKey) (release func(from int), wait <-chan struct{}, land *landing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[k]; ok {
		return nil, fl.done, fl.land
	}
	if f.m == nil {
		f.m = map[shardKey]*flight{}
	}
	fl := &flight{done: make(chan struct{}), land: newLanding()}
	f.m[k] = fl
	return func(from int) {
		f.mu.Lock()
		delete(f.m, k)
		if from >= 0 {
			if f.from == nil {
				f.from = map[shardKey]int{}
			}
			f.from[k] = from
		}
		f.mu.Unlock()
		close(fl.done)
	}, nil, fl.land
}

// source is the rank a finished fetch copied k from, or −1.
func (f *flights) source(k shardKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.from[k]; ok {
		return r
	}
	return -1
}
