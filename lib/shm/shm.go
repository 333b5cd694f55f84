// Package shm is trainwire's one shared-memory mechanism: memfd-backed
// segments that a process maps, hands to another process of the same user
// (by passing the descriptor over a Unix socket with SCM_RIGHTS, or by a
// /proc/<pid>/fd/<n> path), and reads through ranges bounded against the
// segment's size.
//
// ckpt's agent keeps its checkpoint buffers in segments it creates; the
// serve sidecars map the segments their clients create and pass. A segment
// mapped from another process is sealed against shrinking first, so the
// other process cannot truncate memory this one is reading (which would
// fault, not fail).
package shm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Segment is a memfd (or other shared-memory file) mapped into this
// process, read-write and shared.
type Segment struct {
	fd   int
	data []byte
}

// Create makes a memfd of size bytes and maps it. With populate, every page
// is allocated now (one madvise instead of a fault per page later). The
// memory is released when every process has closed and unmapped it (kill
// -9 included): nothing is left behind in /dev/shm. The memfd allows
// sealing, so a process it is passed to can seal it (Map).
func Create(name string, size int64, populate bool) (*Segment, error) {
	if size < 0 {
		return nil, fmt.Errorf("shm: segment %q: size %d", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create %q: %w", name, err)
	}
	s := &Segment{fd: fd}
	if err := s.Resize(size, populate); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// Map maps the whole of fd, a descriptor received from another process (it
// is the Segment's from now on, closed by Close or on error). The file must
// be sealable against shrinking (a memfd created with MFD_ALLOW_SEALING, or
// already sealed): Map adds F_SEAL_SHRINK, so its size cannot drop under
// this process's reads. An empty file maps to an empty segment.
func Map(fd int) (*Segment, error) {
	s := &Segment{fd: fd}
	if err := s.mapShared(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// mapShared seals the file against shrinking and maps all of it.
func (s *Segment) mapShared() error {
	if err := sealShrink(s.fd); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("shm: descriptor is not a regular file (mode %#o)", st.Mode)
	}
	if st.Size == 0 {
		s.data = []byte{}
		return nil
	}
	if st.Size < 0 || uint64(st.Size) > uint64(maxInt) {
		return fmt.Errorf("shm: segment of %d bytes cannot be mapped", st.Size)
	}
	d, err := unix.Mmap(s.fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shm: mmap %d bytes: %w", st.Size, err)
	}
	s.data = d
	return nil
}

const maxInt = int(^uint(0) >> 1)

// sealShrink adds F_SEAL_SHRINK to fd, or checks it is there already.
func sealShrink(fd int) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("shm: F_GET_SEALS: %w (pass a memfd created with MFD_ALLOW_SEALING)", err)
	}
	if seals&unix.F_SEAL_SHRINK != 0 {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errors.New("shm: the segment cannot be sealed against shrinking: create the memfd with MFD_ALLOW_SEALING")
		}
		return fmt.Errorf("shm: F_ADD_SEALS: %w", err)
	}
	return nil
}

// Resize sets the segment's size and maps it again (the old mapping, and
// any slice of it, is gone). It is for segments this process created.
func (s *Segment) Resize(size int64, populate bool) error {
	if size < 0 || uint64(size) > uint64(maxInt) {
		return fmt.Errorf("shm: resize to %d bytes", size)
	}
	if len(s.data) > 0 {
		if err := unix.Munmap(s.data); err != nil {
			return fmt.Errorf("shm: munmap: %w", err)
		}
	}
	s.data = nil
	if err := unix.Ftruncate(s.fd, size); err != nil {
		return fmt.Errorf("shm: ftruncate to %d bytes: %w", size, err)
	}
	if size == 0 {
		s.data = []byte{}
		return nil
	}
	d, err := unix.Mmap(s.fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shm: mmap %d bytes: %w", size, err)
	}
	// Kernels before 5.14 lack MADV_POPULATE_WRITE: the pages then come
	// on first touch.
	if populate {
		_ = unix.Madvise(d, unix.MADV_POPULATE_WRITE)
	}
	s.data = d
	return nil
}

// Populate allocates the pages of [off, off+n) now (MADV_POPULATE_WRITE; a
// no-op on kernels without it, or for a range outside the segment).
func (s *Segment) Populate(off, n int64) {
	if off < 0 || n <= 0 || off >= int64(len(s.data)) {
		return
	}
	page := int64(os.Getpagesize())
	a := off &^ (page - 1)
	e := min(off+n, int64(len(s.data)))
	_ = unix.Madvise(s.data[a:e], unix.MADV_POPULATE_WRITE)
}

// Bytes is the mapped memory.
func (s *Segment) Bytes() []byte { return s.data }

// Size is the mapped size in bytes.
func (s *Segment) Size() int64 { return int64(len(s.data)) }

// FD is the segment's descriptor, to pass to another process (SendFD).
func (s *Segment) FD() int { return s.fd }

// Path is a path another process of the same user can open to map the
// same memory while this one lives: /proc/<pid>/fd/<fd>.
func (s *Segment) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), s.fd) }

// Range returns the n bytes at off, after checking that they lie inside
// the segment (without overflow, whatever off and n are).
func (s *Segment) Range(off, n int64) ([]byte, error) {
	size := int64(len(s.data))
	if off < 0 || n < 0 || off > size || n > size-off {
		return nil, &RangeError{Off: off, Len: n, Size: size}
	}
	return s.data[off : off+n : off+n], nil
}

// RangeError is a range that does not lie inside a segment.
type RangeError struct{ Off, Len, Size int64 }

func (e *RangeError) Error() string {
	return fmt.Sprintf("bytes [%d, %d+%d) are outside the segment of %d bytes", e.Off, e.Off, e.Len, e.Size)
}

// Close unmaps the memory and closes the descriptor. Slices of the memory
// must not be used after it.
func (s *Segment) Close() error {
	if len(s.data) > 0 {
		_ = unix.Munmap(s.data)
	}
	s.data = nil
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}
