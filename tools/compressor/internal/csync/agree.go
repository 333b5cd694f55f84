package csync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// The ranks' agreement on what they sync. Each rank describes each item
// (the handshake, a tensor, the end of its input) by fields name=value;
// the ranks agree on a batch of items in one round trip when they match,
// and otherwise find the first item and field that differs and the rank
// that has it.

// maxAgreeText bounds the text of one item, maxAgreeItems the items a
// peer may announce (their digests are allocated before they come).
const (
	maxAgreeText  = 1 << 20
	maxAgreeItems = 1 << 20
)

// agree checks that every rank passes the same fields.
func (s *Syncer) agree(ctx context.Context, what string, fields []string) error {
	_, err := s.agreeItems(ctx, func(int) string { return what }, [][]string{fields}, true)
	return err
}

// agreeItems agrees on items with the other ranks and returns how many
// of them (a prefix) every rank has. Round 1 allgathers (count, digest of
// all items) under phase "meta": equal everywhere, every item agrees.
// Otherwise round 2 allgathers every item's digest, and the first item
// below the smallest count whose digests differ is compared field by field
// (its texts allgathered): a *MismatchError naming what(i), the field and
// the rank. Without a difference, the prefix of the smallest count agrees;
// strict makes a rank with fewer items than another a mismatch too (its
// missing item's fields are "(missing)").
func (s *Syncer) agreeItems(ctx context.Context, what func(i int) string, items [][]string, strict bool) (int, error) {
	texts := make([][]byte, len(items))
	digests := make([]byte, 0, 32*len(items))
	for i, fs := range items {
		texts[i] = []byte(strings.Join(fs, "\n"))
		if len(texts[i]) > maxAgreeText {
			texts[i] = texts[i][:maxAgreeText]
		}
		d := sha256.Sum256(texts[i])
		digests = append(digests, d[:]...)
	}
	all := sha256.Sum256(digests)
	msg := binary.LittleEndian.AppendUint64(nil, uint64(len(items)))
	msg = append(msg, all[:]...)
	got := make([]byte, 40*s.n)
	if err := s.meta.AllGatherVBytes(ctx, msg, s.each(40), got); err != nil {
		return 0, err
	}
	same := true
	counts := make([]int, s.n)
	kmin := len(items)
	for p := range s.n {
		c := binary.LittleEndian.Uint64(got[40*p:])
		if c > maxAgreeItems {
			return 0, fmt.Errorf("%s: rank %d announces %d tensors in a batch", what(0), p, c)
		}
		counts[p] = int(c)
		kmin = min(kmin, counts[p])
		same = same && string(got[40*p:40*p+40]) == string(msg)
	}
	if same {
		return len(items), nil
	}
	// Every rank saw the same counts and digests, so every rank is here.
	bc := make([]int, s.n)
	for p := range s.n {
		bc[p] = 32 * counts[p]
	}
	ds := make([]byte, sum(bc))
	if err := s.meta.AllGatherVBytes(ctx, digests, bc, ds); err != nil {
		return 0, err
	}
	off := offsetsOf(bc)
	for i := range kmin {
		d0 := string(ds[32*i : 32*i+32]) // rank 0's
		for p := range s.n {
			if string(ds[off[p]+32*i:off[p]+32*i+32]) != d0 {
				return 0, s.differ(ctx, what(i), items[i], texts[i])
			}
		}
	}
	if strict && kmin < slices.Max(counts) || kmin == 0 {
		// A rank with fewer items: compare item kmin, missing there.
		i := kmin
		var fs []string
		var text []byte
		if i < len(items) {
			fs, text = items[i], texts[i]
		}
		return 0, s.differ(ctx, what(i), fs, text)
	}
	return kmin, nil
}

// differ allgathers one item's text (every rank calls it for the same
// item) and returns the *MismatchError of the first field where another
// rank's differs from fields.
func (s *Syncer) differ(ctx context.Context, what string, fields []string, text []byte) error {
	lens := make([]byte, 8*s.n)
	if err := s.meta.AllGatherVBytes(ctx, binary.LittleEndian.AppendUint64(nil, uint64(len(text))), s.each(8), lens); err != nil {
		return err
	}
	counts := make([]int, s.n)
	for p := range s.n {
		l := binary.LittleEndian.Uint64(lens[8*p:])
		if l > maxAgreeText {
			return fmt.Errorf("%s: rank %d describes its tensor in %d bytes (at most %d)", what, p, l, maxAgreeText)
		}
		counts[p] = int(l)
	}
	texts := make([]byte, sum(counts))
	if err := s.meta.AllGatherVBytes(ctx, text, counts, texts); err != nil {
		return err
	}
	off := offsetsOf(counts)
	for p := range s.n {
		if p == s.r {
			continue
		}
		var theirs []string
		if counts[p] > 0 {
			theirs = strings.Split(string(texts[off[p]:off[p+1]]), "\n")
		}
		if err := s.compareFields(what, p, fields, theirs); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: the ranks' digests differ but their fields do not", what)
}

// each is n counts of b.
func (s *Syncer) each(b int) []int {
	c := make([]int, s.n)
	for i := range c {
		c[i] = b
	}
	return c
}

// compareFields returns a *MismatchError naming the first field of item
// what where rank p's (theirs) differs from this rank's (fields).
func (s *Syncer) compareFields(what string, p int, fields, theirs []string) error {
	for i := range max(len(fields), len(theirs)) {
		mine, t := "(missing)", "(missing)"
		if i < len(fields) {
			mine = fields[i]
		}
		if i < len(theirs) {
			t = theirs[i]
		}
		if mine == t {
			continue
		}
		key, mv, ok := strings.Cut(mine, "=")
		if !ok {
			key, _, _ = strings.Cut(t, "=")
			mv = mine
		}
		_, tv, ok := strings.Cut(t, "=")
		if !ok {
			tv = t
		}
		return &MismatchError{Msg: fmt.Sprintf("%s: rank %d has %s %s, this rank (%d) has %s: every rank must sync the same tensors in the same order with the same flags",
			what, p, key, tv, s.r, mv), Rank: p, Field: key, Theirs: tv, Mine: mv}
	}
	return nil
}
