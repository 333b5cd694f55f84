// Package store holds an agent's checkpoint replicas in memory: one slot
// per rank whose shard the agent keeps (its own and the ones it receives),
// two versions per slot (the committed one and the one in progress), each
// in a shared-memory buffer (memfd) that the trainer on the same machine can
// map without a copy through a socket.
package store

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Buffer is a memfd-backed shared-memory region mapped into this process.
type Buffer struct {
	fd   int
	data []byte
}

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
func (b *Buffer) Populate(off, n int64) {
	if off < 0 || n <= 0 || off >= int64(len(b.data)) {
		return
	}
	page := int64(os.Getpagesize())
	s := off &^ (page - 1)
	e := min(off+n, int64(len(b.data)))
	_ = unix.Madvise(b.data[s:e], unix.MADV_POPULATE_WRITE)
}

func newBuffer(name string, size int64, populate bool) (*Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("store: buffer size %d", size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("store: memfd_create: %w", err)
	}
	b := &Buffer{fd: fd}
	if err := b.resize(size, populate); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return b, nil
}

func (b *Buffer) resize(size int64, populate bool) error {
	if b.data != nil {
		if err := unix.Munmap(b.data); err != nil {
			return fmt.Errorf("store: munmap: %w", err)
		}
		b.data = nil
	}
	if err := unix.Ftruncate(b.fd, size); err != nil {
		return fmt.Errorf("store: ftruncate to %d bytes: %w", size, err)
	}
	if size == 0 {
		b.data = []byte{}
		return nil
	}
	d, err := unix.Mmap(b.fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("store: mmap %d bytes: %w", size, err)
	}
	// Allocate every page now, in one call, rather than one page fault at
	// a time while a replica or a restore streams in (a fault per 4 KiB
	// page costs more than the copy into it). Kernels before 5.14 lack
	// MADV_POPULATE_WRITE: the pages then come on first touch, as before.
	if populate {
		_ = unix.Madvise(d, unix.MADV_POPULATE_WRITE)
	}
	b.data = d
	return nil
}

// Bytes is the mapped memory.
func (b *Buffer) Bytes() []byte { return b.data }

// Cap is the mapped size.
func (b *Buffer) Cap() int64 { return int64(len(b.data)) }

// Path is a path another process of the same user can open to map the same
// memory: /proc/<agent pid>/fd/<fd>.
func (b *Buffer) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), b.fd) }

// Close unmaps and closes the memfd.
func (b *Buffer) Close() error {
	if b.data != nil && len(b.data) > 0 {
		_ = unix.Munmap(b.data)
	}
	b.data = nil
	return unix.Close(b.fd)
}
