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
	m    map[shardKey]chan struct{}
	from map[shardKey]int // the rank a finished fetch copied k from
}

// claim makes the caller the one fetching k, with release to call when
// done (with the rank it copied k from, or −1), or, when another fetch of
// k is in flight, returns a channel closed when that one ends (the caller
// then looks in the store and, if the shard is not there, claims again).
func (f *flights) claim(k shardKey) (release func(from int), wait <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.m[k]; ok {
		return nil, ch
	}
	if f.m == nil {
		f.m = map[shardKey]chan struct{}{}
	}
	ch := make(chan struct{})
	f.m[k] = ch
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
		close(ch)
	}, nil
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
