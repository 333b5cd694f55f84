package store

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
)

// State of a version.
type State int

// Version states. Only Complete versions are ever read.
const (
	Empty State = iota
	// InProgress: bytes are arriving; never readable.
	InProgress
	// Complete: every byte arrived and the digest matched; the commit
	// record (iter, len, xxh3) was written last.
	Complete
	// Failed: abandoned mid-way (sender died, corrupt chunk, timeout).
	Failed
)

func (s State) String() string {
	return [...]string{"empty", "in-progress", "complete", "failed"}[s]
}

// Version is one of a slot's two buffers.
type Version struct {
	Owner int
	// Commit record: written last, read only when State is Complete.
	// Epoch is the recovery epoch of the save attempt the bytes belong to:
	// a shard saved again after a rollback has the same Iter and a higher
	// Epoch, and the commit of an iteration names the epoch it counts.
	Iter   int64
	Epoch  int64
	Len    int64
	XXH3   uint64
	Format string
	State  State
	// When is when the version became Complete.
	When time.Time

	buf  *Buffer
	pins int
}

// Data is the version's bytes (Len of them). Only for a pinned version.
func (v *Version) Data() []byte { return v.buf.Bytes()[:v.Len] }

// Path is the shared-memory path of the version's buffer.
func (v *Version) Path() string { return v.buf.Path() }

// Info is a version's commit record, as listed in an inventory.
type Info struct {
	Owner  int    `json:"owner"`
	Iter   int64  `json:"iter"`
	Epoch  int64  `json:"epoch"`
	Len    int64  `json:"len"`
	XXH3   uint64 `json:"xxh3"`
	Format string `json:"format"`
	State  string `json:"state"`
}

// ErrTooBig is wrapped by a refusal for lack of memory.
var ErrTooBig = errors.New("over the configured memory")

// Store is an agent's replicas: per owner rank, two versions.
type Store struct {
	mu    sync.Mutex
	cond  *sync.Cond
	slots map[int]*[2]*Version
	// committed is the highest globally committed iteration this agent
	// knows (-1: none), committedEpoch the epoch of the attempt committed.
	committed      int64
	committedEpoch int64
	limit          int64
	used           int64
	name           string
}

// New returns a store that holds at most limit bytes of buffers (0: no
// limit); name prefixes the memfd names.
func New(name string, limit int64) *Store {
	s := &Store{slots: map[int]*[2]*Version{}, committed: -1, limit: limit, name: name}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Committed returns the highest globally committed iteration known here.
func (s *Store) Committed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// CommittedAt returns the highest globally committed iteration known
// here and the epoch of the attempt that was committed.
func (s *Store) CommittedAt() (iter, epoch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed, s.committedEpoch
}

// SetCommitted raises the committed iteration to iter, saved in epoch (it
// never goes down), and reports whether it changed.
func (s *Store) SetCommitted(iter, epoch int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if iter <= s.committed {
		return false
	}
	s.committed, s.committedEpoch = iter, epoch
	s.cond.Broadcast()
	return true
}

// Used is the bytes of buffers held; Limit the configured bound.
func (s *Store) Used() (used, limit int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.limit
}

func (s *Store) slot(owner int) *[2]*Version {
	sl := s.slots[owner]
	if sl == nil {
		sl = &[2]*Version{{Owner: owner}, {Owner: owner}}
		s.slots[owner] = sl
	}
	return sl
}

// keep returns the index of the version that must survive a new write in
// sl: the complete version of the committed iteration (of its epoch), or
// the newest complete one below it; -1 if none. A complete version newer
// than the committed iteration is not kept: it is either still replicating
// (its owner saves nothing new before it commits or fails) or an abandoned
// attempt that a save after the rollback must be able to replace.
func (s *Store) keep(sl *[2]*Version) int {
	best := -1
	for i, v := range sl {
		if v.State != Complete || v.Iter > s.committed || (v.Iter == s.committed && v.Epoch != s.committedEpoch) {
			continue
		}
		if best < 0 || v.Iter > sl[best].Iter {
			best = i
		}
	}
	return best
}

// Begin reserves the version of owner's slot that a new iteration may
// overwrite (never the committed one: C-RC-1) and sizes its buffer to
// size bytes; epoch is the save attempt's recovery epoch. It waits up to wait for readers of that buffer to finish.
// The returned version is InProgress and pinned; finish it with Seal or
// Abort.
func (s *Store) Begin(owner int, iter, epoch, size int64, format string, wait time.Duration) (*Version, error) {
	if size < 0 {
		return nil, fmt.Errorf("store: negative size %d", size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slot(owner)
	k := s.keep(sl)
	if k >= 0 && iter <= sl[k].Iter {
		return nil, fmt.Errorf("store: iteration %d of rank %d is not newer than the committed iteration %d already held", iter, owner, sl[k].Iter)
	}
	w := s.writable(sl, k, size)
	v := sl[w]
	deadline := time.Now().Add(wait)
	for v.pins > 0 || v.State == InProgress {
		if time.Now().After(deadline) {
			if v.State == InProgress {
				return nil, fmt.Errorf("store: rank %d's slot is busy receiving iteration %d", owner, v.Iter)
			}
			return nil, fmt.Errorf("store: rank %d's iteration %d is still being read (restore or replication in progress)", owner, v.Iter)
		}
		waitCond(s.cond, 50*time.Millisecond)
	}
	var old int64
	if v.buf != nil {
		old = v.buf.Cap()
	}
	if v.buf == nil || old < size || old > 2*size+(64<<20) {
		if s.limit > 0 && s.used-old+size > s.limit {
			return nil, fmt.Errorf("store: %w: a shard of %d bytes for rank %d needs %d bytes in all, --memory is %d (holding %d); nothing held was dropped",
				ErrTooBig, size, owner, s.used-old+size, s.limit, s.used)
		}
		if v.buf != nil {
			_ = v.buf.Close()
			s.used -= old
			v.buf = nil
		}
		b, err := NewBuffer(fmt.Sprintf("%s-r%d-v%d", s.name, owner, w), size)
		if err != nil {
			v.State = Empty
			return nil, err
		}
		v.buf = b
		s.used += size
	}
	v.Iter, v.Epoch, v.Len, v.XXH3, v.Format, v.State, v.pins = iter, epoch, size, 0, format, InProgress, 1
	return v, nil
}

// writable picks the buffer of sl a new version goes into, given k, the
// one to keep (-1: none): the other one; with none to keep, one that is
// not being read or written, then one holding no complete version, then
// the older complete one, then one already big enough.
func (s *Store) writable(sl *[2]*Version, k int, size int64) int {
	if k >= 0 {
		return 1 - k
	}
	a, b := sl[0], sl[1]
	idle := func(v *Version) bool { return v.pins == 0 && v.State != InProgress }
	big := func(v *Version) bool { return v.buf != nil && v.buf.Cap() >= size }
	pick := func(second bool) int {
		if second {
			return 1
		}
		return 0
	}
	switch {
	case idle(a) != idle(b):
		return pick(idle(b))
	case (a.State == Complete) != (b.State == Complete):
		return pick(a.State == Complete)
	case a.State == Complete && a.Iter != b.Iter:
		return pick(b.Iter < a.Iter)
	}
	return pick(big(b) && !big(a))
}

// Adopt stores b (len bytes, already verified against sum) as owner's
// complete version of iter — a replacement agent keeping the shard it
// fetched from a peer — and returns it pinned. It takes the slot's
// overwritable version, never the committed one; on refusal b is left to
// the caller.
func (s *Store) Adopt(owner int, iter, epoch, n int64, sum uint64, format string, b *Buffer) (*Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slot(owner)
	k := s.keep(sl)
	if k >= 0 && iter <= sl[k].Iter {
		return nil, fmt.Errorf("store: rank %d already holds iteration %d", owner, sl[k].Iter)
	}
	v := sl[s.writable(sl, k, b.Cap())]
	if v.pins > 0 || v.State == InProgress {
		return nil, fmt.Errorf("store: rank %d's slot is busy", owner)
	}
	var old int64
	if v.buf != nil {
		old = v.buf.Cap()
	}
	if s.limit > 0 && s.used-old+b.Cap() > s.limit {
		return nil, fmt.Errorf("store: %w", ErrTooBig)
	}
	if v.buf != nil {
		_ = v.buf.Close()
	}
	s.used += b.Cap() - old
	v.buf = b
	v.Iter, v.Epoch, v.Len, v.XXH3, v.Format, v.State, v.When, v.pins = iter, epoch, n, sum, format, Complete, time.Now(), 1
	return v, nil
}

// Seal completes v: it checks the digest of its bytes against want (0
// skips the check and records the computed one), then writes the commit
// record last. It unpins v.
func (s *Store) Seal(v *Version, want uint64) error {
	return s.SealHashed(v, xxh3.Hash(v.Data()), want)
}

// SealHashed is Seal for a version whose XXH3 h was computed over its
// bytes as they arrived (replication computes it while verifying each
// chunk, so the shard is not read a second time).
func (s *Store) SealHashed(v *Version, h, want uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.unpinLocked(v)
	if v.State != InProgress {
		return fmt.Errorf("store: rank %d iteration %d is %v, not in progress", v.Owner, v.Iter, v.State)
	}
	if want != 0 && h != want {
		v.State = Failed
		return fmt.Errorf("store: rank %d iteration %d: digest mismatch (xxh3 %016x, expected %016x); not marked complete", v.Owner, v.Iter, h, want)
	}
	v.XXH3, v.When, v.State = h, time.Now(), Complete
	return nil
}

// Abort marks an in-progress v failed (never readable) and unpins it.
func (s *Store) Abort(v *Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.State == InProgress {
		v.State = Failed
	}
	s.unpinLocked(v)
}

// Get pins and returns owner's complete version of iter saved in epoch
// (AnyEpoch: the newest epoch held), or nil.
func (s *Store) Get(owner int, iter, epoch int64) *Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[owner]
	if sl == nil {
		return nil
	}
	var got *Version
	for _, v := range sl {
		if v.State == Complete && v.Iter == iter && (epoch == AnyEpoch || v.Epoch == epoch) && (got == nil || v.Epoch > got.Epoch) {
			got = v
		}
	}
	if got != nil {
		got.pins++
	}
	return got
}

// AnyEpoch asks Get for a version of any epoch.
const AnyEpoch = -1

// Unpin releases a version returned by Get.
func (s *Store) Unpin(v *Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpinLocked(v)
}

func (s *Store) unpinLocked(v *Version) {
	if v.pins > 0 {
		v.pins--
	}
	s.cond.Broadcast()
}

// Inventory lists every version with a commit record or in flight, by
// owner then iteration.
func (s *Store) Inventory() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Info
	for owner, sl := range s.slots {
		for _, v := range sl {
			if v.State == Empty {
				continue
			}
			out = append(out, Info{Owner: owner, Iter: v.Iter, Epoch: v.Epoch, Len: v.Len, XXH3: v.XXH3, Format: v.Format, State: v.State.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Owner != out[j].Owner {
			return out[i].Owner < out[j].Owner
		}
		return out[i].Iter < out[j].Iter
	})
	return out
}

// Close frees every buffer.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.slots {
		for _, v := range sl {
			if v.buf != nil {
				_ = v.buf.Close()
				v.buf = nil
			}
			v.State = Empty
		}
	}
	s.used = 0
}

// waitCond waits on c for at most d (sync.Cond has no timeout).
func waitCond(c *sync.Cond, d time.Duration) {
	t := time.AfterFunc(d, c.Broadcast)
	c.Wait()
	t.Stop()
}

// Drop frees owner's versions older than iter that nobody is reading (a
// temporary copy superseded by a newer committed iteration) and forgets
// the slot once both of its versions are gone. It returns the bytes freed.
func (s *Store) Drop(owner int, iter int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[owner]
	if sl == nil {
		return 0
	}
	var freed int64
	for _, v := range sl {
		if v.pins > 0 || v.State == InProgress || (v.State != Empty && v.Iter >= iter) {
			continue
		}
		if v.buf != nil {
			freed += v.buf.Cap()
			_ = v.buf.Close()
			v.buf = nil
		}
		v.State = Empty
	}
	s.used -= freed
	if sl[0].State == Empty && sl[1].State == Empty && sl[0].pins == 0 && sl[1].pins == 0 {
		delete(s.slots, owner)
	}
	return freed
}
