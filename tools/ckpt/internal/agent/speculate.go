package agent

import (
	"trainwire.dev/tools/ckpt/internal/store"
)

// speculation is a streamed restore's head start. Before the agents agree
// on what to restore (two rounds of inventories and a recovery epoch, tens
// to hundreds of milliseconds when the host is busy), the newest committed
// iteration this agent holds of its own rank, the answer in the common
// case, is announced to the trainer, which maps it and copies it out, and
// hashed, while the agreement runs. If the agreement picks another
// version, the trainer is told "moved" and starts over (what it copied is
// never the checkpoint before "done"); if it picks this one, the digest is
// already computed.
type speculation struct {
	st  *store.Store
	v   *store.Version // pinned until finish
	sum chan uint64    // its XXH3, once hashed (buffered: read by digest and finish)
}

// speculate announces this rank's newest committed version held here, if
// any, to s's trainer and starts hashing it; nil when there is none.
func (a *Agent) speculate(s *streamer) *speculation {
	iter, epoch := a.st.CommittedAt()
	if iter < 0 {
		return nil
	}
	v := a.st.Get(a.cfg.Rank, iter, epoch)
	if v == nil {
		return nil
	}
	s.iter, s.committed = iter, iter
	s.announce(v.Path(), store.Info{Len: v.Len, XXH3: v.XXH3, Format: v.Format}, "local", v.Len)
	sp := &speculation{st: a.st, v: v, sum: make(chan uint64, 1)}
	go func() { sp.sum <- a.digestOf(v, v.Data()) }()
	return sp
}

// hashOf returns v's digest if the speculation hashed v.
func (sp *speculation) hashOf(v *store.Version) (uint64, bool) {
	if sp == nil || sp.v != v {
		return 0, false
	}
	h := <-sp.sum
	sp.sum <- h
	return h, true
}

// finish waits for the hash (it reads the version's memory) and unpins
// the version.
func (sp *speculation) finish() {
	if sp == nil {
		return
	}
	<-sp.sum
	sp.st.Unpin(sp.v)
}

// restoreDigest returns the XXH3 of data, the bytes of v (nil: not a
// version of the store): the speculation's if it hashed v, else the
// at-rest check's or one computed now (digestOf).
func (a *Agent) restoreDigest(s *streamer, v *store.Version, data []byte) uint64 {
	if h, ok := s.spec.hashOf(v); ok {
		return h
	}
	return a.digestOf(v, data)
}
