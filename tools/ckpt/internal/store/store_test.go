package store

import (
	"errors"
	"testing"
	"time"
)

func fill(t *testing.T, s *Store, owner int, iter int64, b byte, n int64) *Version {
	t.Helper()
	v, err := s.Begin(owner, iter, 0, n, "raw", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Data() {
		v.Data()[i] = b
	}
	return v
}

// C-RP-1 and C-RC-1: two versions per slot; a version is readable only
// once sealed; the committed one is never overwritten.
func TestDoubleBuffer(t *testing.T) {
	s := New("test", 0)
	defer s.Close()
	v1 := fill(t, s, 0, 1, 1, 1000)
	if s.Get(0, 1, AnyEpoch) != nil {
		t.Fatal("an in-progress version is readable")
	}
	if err := s.Seal(v1, 0); err != nil {
		t.Fatal(err)
	}
	s.SetCommitted(1, 0)
	// Iteration 2 in progress, then abandoned: 1 stays.
	v2 := fill(t, s, 0, 2, 2, 1000)
	s.Abort(v2)
	if g := s.Get(0, 2, AnyEpoch); g != nil {
		t.Fatal("an aborted version is readable")
	}
	g := s.Get(0, 1, AnyEpoch)
	if g == nil || g.Data()[0] != 1 {
		t.Fatal("the committed version was lost")
	}
	s.Unpin(g)
	// Iteration 2 complete but not committed; iteration 3 must overwrite
	// 2's buffer... only once 2 is committed: with committed = 1, the new
	// write goes over the non-committed one, keeping 1.
	v2 = fill(t, s, 0, 2, 2, 1000)
	if err := s.Seal(v2, 0); err != nil {
		t.Fatal(err)
	}
	v3 := fill(t, s, 0, 3, 3, 1000)
	if g := s.Get(0, 1, AnyEpoch); g == nil {
		t.Fatal("committed iteration 1 overwritten by iteration 3 while 2 was not committed")
	} else {
		s.Unpin(g)
	}
	if err := s.Seal(v3, 0); err != nil {
		t.Fatal(err)
	}
	s.SetCommitted(3, 0)
	v4 := fill(t, s, 0, 4, 4, 1000)
	if g := s.Get(0, 3, AnyEpoch); g == nil || g.Data()[999] != 3 {
		t.Fatal("committed iteration 3 overwritten by 4")
	} else {
		s.Unpin(g)
	}
	// A digest mismatch never completes.
	if err := s.Seal(v4, 12345); err == nil {
		t.Fatal("seal with a wrong digest succeeded")
	}
	if s.Get(0, 4, AnyEpoch) != nil {
		t.Fatal("a version with a bad digest is readable")
	}
	// Not newer than what is held: refused.
	if _, err := s.Begin(0, 3, 0, 10, "raw", time.Second); err == nil {
		t.Fatal("an old iteration was accepted")
	}
}

func TestMemoryLimit(t *testing.T) {
	s := New("test", 3000)
	defer s.Close()
	v := fill(t, s, 0, 1, 1, 1000)
	_ = s.Seal(v, 0)
	v = fill(t, s, 1, 1, 1, 1000)
	_ = s.Seal(v, 0)
	_, err := s.Begin(0, 2, 0, 2500, "raw", time.Second)
	if !errors.Is(err, ErrTooBig) {
		t.Fatalf("over the limit: %v", err)
	}
	if g := s.Get(0, 1, AnyEpoch); g == nil {
		t.Fatal("a refused write dropped a version")
	}
	if used, _ := s.Used(); used != 2000 {
		t.Fatalf("used %d, want 2000", used)
	}
}

func TestPinnedNotOverwritten(t *testing.T) {
	s := New("test", 0)
	defer s.Close()
	for i := int64(1); i <= 2; i++ {
		v := fill(t, s, 0, i, byte(i), 100)
		_ = s.Seal(v, 0)
	}
	s.SetCommitted(2, 0)
	g := s.Get(0, 1, AnyEpoch) // a reader holds iteration 1
	if _, err := s.Begin(0, 3, 0, 100, "raw", 50*time.Millisecond); err == nil {
		t.Fatal("a pinned version was overwritten")
	}
	s.Unpin(g)
	if _, err := s.Begin(0, 3, 0, 100, "raw", time.Second); err != nil {
		t.Fatal(err)
	}
}

// Issue 23: a complete version newer than the committed iteration (an
// attempt abandoned by a recovery) is not "already held": a save of the
// same iteration in a later epoch replaces it, while the committed one
// stays; Get tells the attempts apart by epoch.
func TestAbandonedAttemptReplaced(t *testing.T) {
	s := New("test", 0)
	defer s.Close()
	v1 := fill(t, s, 0, 1, 1, 100)
	if err := s.Seal(v1, 0); err != nil {
		t.Fatal(err)
	}
	s.SetCommitted(1, 0)
	v2 := fill(t, s, 0, 2, 2, 100) // epoch 0, never committed
	if err := s.Seal(v2, 0); err != nil {
		t.Fatal(err)
	}
	v2b, err := s.Begin(0, 2, 1, 100, "raw", time.Second) // after the rollback
	if err != nil {
		t.Fatalf("the abandoned iteration 2 blocks its re-save: %v", err)
	}
	for i := range v2b.Data() {
		v2b.Data()[i] = 22
	}
	if err := s.Seal(v2b, 0); err != nil {
		t.Fatal(err)
	}
	if g := s.Get(0, 2, 0); g != nil {
		t.Fatal("the abandoned attempt of iteration 2 is still readable")
	}
	g := s.Get(0, 2, 1)
	if g == nil || g.Data()[0] != 22 {
		t.Fatal("the new attempt of iteration 2 is not readable")
	}
	s.Unpin(g)
	if g := s.Get(0, 1, 0); g == nil {
		t.Fatal("the committed iteration 1 was overwritten")
	} else {
		s.Unpin(g)
	}
	s.SetCommitted(2, 1)
	if _, err := s.Begin(0, 2, 2, 100, "raw", time.Second); err == nil {
		t.Fatal("a committed iteration was accepted again")
	}
	// The committed version is the one of the committed epoch.
	if _, err := s.Begin(0, 3, 2, 100, "raw", time.Second); err != nil {
		t.Fatal(err)
	}
	if g := s.Get(0, 2, 1); g == nil {
		t.Fatal("iteration 3 overwrote the committed attempt of iteration 2")
	} else {
		s.Unpin(g)
	}
}

// Drop frees a superseded temporary copy, but never one being read, one
// in progress, or one as new as the iteration named.
func TestDrop(t *testing.T) {
	s := New("test", 0)
	defer s.Close()
	v := fill(t, s, 3, 1, 7, 4096)
	if err := s.Seal(v, 0); err != nil {
		t.Fatal(err)
	}
	if n := s.Drop(3, 1); n != 0 {
		t.Fatalf("Drop(3, 1) freed %d bytes of iteration 1 itself", n)
	}
	r := s.Get(3, 1, AnyEpoch)
	if n := s.Drop(3, 2); n != 0 {
		t.Fatalf("Drop freed %d bytes of a pinned version", n)
	}
	s.Unpin(r)
	if n := s.Drop(3, 2); n != 4096 {
		t.Fatalf("Drop(3, 2) freed %d bytes, want 4096", n)
	}
	if used, _ := s.Used(); used != 0 || s.Get(3, 1, AnyEpoch) != nil || len(s.Inventory()) != 0 {
		t.Fatalf("after Drop: used %d, inventory %v", used, s.Inventory())
	}
	p := fill(t, s, 4, 5, 1, 100)
	if n := s.Drop(4, 9); n != 0 {
		t.Fatalf("Drop freed %d bytes of an in-progress version", n)
	}
	s.Abort(p)
}
