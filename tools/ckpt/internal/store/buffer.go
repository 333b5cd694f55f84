// Package store holds an agent's checkpoint replicas in memory: one slot
// per rank whose shard the agent keeps (its own and the ones it receives),
// two versions per slot (the committed one and the one in progress), each
// in a shared-memory buffer (memfd) that the trainer on the same machine can
// map without a copy through a socket.
package store

import (
	"fmt"

	"trainwire.dev/lib/shm"
)

// Buffer is a memfd-backed shared-memory region mapped into this process
// (a lib/shm segment).
type Buffer struct{ seg *shm.Segment }

// NewBuffer creates a memfd of size bytes and maps it. The memory is
// released when the Buffer is closed or the process dies (kill -9
// included): nothing is left behind in /dev/shm.
func NewBuffer(name string, size int64) (*Buffer, error) {
	return newBuffer(name, size, true)
}

// NewBufferLazy is NewBuffer without allocating the pages up front: the
// caller populates them (Populate) ahead of its writes, e.g. in another
// goroutine while the data streams in.
func NewBufferLazy(name string, size int64) (*Buffer, error) {
	return newBuffer(name, size, false)
}

// Populate allocates the pages of [off, off+n) now (MADV_POPULATE_WRITE;
// a no-op on kernels without it).
func (b *Buffer) Populate(off, n int64) { b.seg.Populate(off, n) }

func newBuffer(name string, size int64, populate bool) (*Buffer, error) {
	seg, err := shm.Create(name, size, populate)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &Buffer{seg: seg}, nil
}

// Bytes is the mapped memory.
func (b *Buffer) Bytes() []byte { return b.seg.Bytes() }

// Cap is the mapped size.
func (b *Buffer) Cap() int64 { return b.seg.Size() }

// Path is a path another process of the same user can open to map the same
// memory: /proc/<agent pid>/fd/<fd>.
func (b *Buffer) Path() string { return b.seg.Path() }

// Close unmaps and closes the memfd.
func (b *Buffer) Close() error { return b.seg.Close() }
