// Package tier is ckpt's persistent tier: a directory (local disk, NFS, a
// mounted object store) of shard files, published by a pebble catalog
// (internal/catalog). Writers hold an exclusive flock on DIR/.lock; shard
// files are written to a temporary directory, fsynced, renamed into place,
// and only then named by the catalog (one synced batch). Readers consult
// only the catalog, so a killed writer leaves nothing they can see.
package tier

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"trainwire.dev/tools/ckpt/internal/catalog"
)

// ErrBusy is returned by Lock when another process holds the lock.
var ErrBusy = errors.New("another ckpt persist or prune holds the lock")

// CatalogWait bounds how long an opener waits for another process's brief
// hold on the catalog.
const CatalogWait = 60 * time.Second

// Lock takes the exclusive writer lock DIR/.lock, waiting up to wait
// (0: fail at once with ErrBusy). The lock dies with the process.
func Lock(dir string, wait time.Duration) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, ErrBusy
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Source is where persist reads committed shards from (the agents).
type Source interface {
	World() int
	Latest(ctx context.Context) (int64, [][]int, error)
	Fetch(ctx context.Context, holder, owner int, iter int64, w io.Writer, progress func(int64)) (Fetched, error)
}

// OwnHolders is Latest's holder list for a Source of world ranks that
// serves each rank's shard from that rank only (files, memory).
func OwnHolders(world int) [][]int {
	where := make([][]int, world)
	for r := range where {
		where[r] = []int{r}
	}
	return where
}

// Fetched describes a shard a Source wrote.
type Fetched struct {
	Len    int64
	XXH3   uint64
	CRC32C uint32
	Format string
}

// Result is what Persist did.
type Result struct {
	Iter    int64
	Bytes   int64
	Skipped bool // already in the catalog
	Shards  int
}

// Options tune Persist.
type Options struct {
	Run  string
	Tags []string
	// Rate, if > 0, caps the bytes per second written.
	Rate float64
	// Progress, if set, is called with bytes done so far.
	Progress func(done int64)
	// FS is the file system the shard files, the manifest and the
	// iteration directories are written through (nil: the operating
	// system's); tests inject faults with pebble's errorfs. The catalog
	// itself is always on the operating system's.
	FS vfs.FS
}

func (o Options) fs() vfs.FS {
	if o.FS == nil {
		return vfs.Default
	}
	return o.FS
}

func fsyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}

// Cleanup removes what a killed writer left: temporary directories and,
// with iterDirs (prune), iteration directories the catalog does not name.
// Persist passes false: an unnamed iteration directory is complete (a
// persist killed between its rename and the catalog, or one a damaged
// catalog lost), and `ckpt catalog rebuild` can publish it. Hold the lock.
func Cleanup(dir string, named map[int64]bool, iterDirs bool) ([]string, error) {
	return cleanup(vfs.Default, dir, named, iterDirs)
}

func cleanup(fs vfs.FS, dir string, named map[int64]bool, iterDirs bool) ([]string, error) {
	ents, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	sort.Strings(ents)
	var gone []string
	for _, n := range ents {
		it, isIter := catalog.ParseIterDir(n)
		isIter = isIter && iterDirs
		if strings.HasPrefix(n, ".tmp-") || (isIter && !named[it]) {
			if err := fs.RemoveAll(filepath.Join(dir, n)); err != nil {
				return gone, err
			}
			gone = append(gone, n)
		}
	}
	return gone, nil
}

// Named returns the iterations the catalog names.
func Named(c *catalog.Catalog) (map[int64]bool, []*catalog.Manifest, error) {
	all, err := c.List()
	if err != nil {
		return nil, nil, err
	}
	named := map[int64]bool{}
	for _, m := range all {
		named[m.Iter] = true
	}
	return named, all, nil
}

// ErrUnavailable marks a Persist failure on the agents' side: they have
// no committed checkpoint, cannot be reached, or no live holder could
// send some rank's shard. Failures of the persistent directory itself
// (disk full, permissions, the catalog) are not marked: the checkpoint is
// still in the agents' memory, and the fix is on this machine.
var ErrUnavailable = errors.New("the agents could not provide a complete committed checkpoint")

type unavailable struct{ error }

// agentsErr marks err as the agents' unless ctx was cancelled (an
// interrupted run is neither the agents' fault nor the disk's).
func agentsErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return unavailable{err}
}

func (u unavailable) Unwrap() error        { return u.error }
func (u unavailable) Is(target error) bool { return target == ErrUnavailable }

// rateWriter paces writes to w at rate bytes per second (0: unpaced) and
// keeps the first error of w itself (werr), so a failing disk is told
// apart from a failing sender.
type rateWriter struct {
	w     io.Writer
	rate  float64
	start time.Time
	n     int64
	ctx   context.Context
	werr  error
}

func (r *rateWriter) Write(p []byte) (int, error) {
	const piece = 256 << 10
	written := 0
	for len(p) > 0 {
		b := p[:min(len(p), piece)]
		n, err := r.w.Write(b)
		written += n
		r.n += int64(n)
		if err != nil {
			r.werr = err
			return written, err
		}
		p = p[n:]
		if r.rate > 0 {
			due := r.start.Add(time.Duration(float64(r.n) / r.rate * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-r.ctx.Done():
				return written, r.ctx.Err()
			}
		}
	}
	return written, nil
}

// Persist writes the latest committed checkpoint of every rank to dir and
// publishes it in the catalog. The caller holds the lock. If the catalog
// already names that iteration, it does nothing (idempotent). An error
// that is the agents' (see ErrUnavailable) matches errors.Is(err,
// ErrUnavailable); a failure to write dir stops at once, without trying
// the next holder, and publishes nothing: the iterations published before
// stay as they were.
func Persist(ctx context.Context, dir string, src Source, o Options) (Result, error) {
	iter, where, err := src.Latest(ctx)
	if err != nil {
		return Result{}, agentsErr(ctx, err)
	}
	c, err := catalog.Open(dir, CatalogWait)
	if err != nil {
		return Result{}, err
	}
	named, _, err := Named(c)
	c.Close()
	if err != nil {
		return Result{}, err
	}
	if named[iter] {
		return Result{Iter: iter, Skipped: true}, nil
	}
	fs := o.fs()
	if _, err := cleanup(fs, dir, named, false); err != nil {
		return Result{}, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%s-%d", catalog.DirName(iter), os.Getpid()))
	if err := fs.MkdirAll(tmp, 0o755); err != nil {
		return Result{}, err
	}
	m := &catalog.Manifest{Iter: iter, World: src.World(), Run: o.Run, Created: time.Now().UTC(), Tags: o.Tags}
	sw := &shardWriter{ctx: ctx, fs: fs, src: src, o: o, rw: &rateWriter{rate: o.Rate, start: time.Now(), ctx: ctx}}
	for owner, hs := range where {
		s, err := sw.write(tmp, owner, iter, hs, m.Bytes)
		if err != nil {
			_ = fs.RemoveAll(tmp)
			return Result{}, err
		}
		m.Bytes += s.Len
		m.Shards = append(m.Shards, s)
	}
	if err := place(fs, dir, tmp, m); err != nil {
		_ = fs.RemoveAll(tmp)
		return Result{}, err
	}
	// Last: the catalog names it (one synced batch).
	c, err = catalog.Open(dir, CatalogWait)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	if err := c.Publish(m); err != nil {
		return Result{}, err
	}
	return Result{Iter: iter, Bytes: m.Bytes, Shards: len(m.Shards)}, nil
}

// place writes m's manifest into tmp, fsyncs it and renames it to its
// iteration directory, fsyncing dir.
func place(fs vfs.FS, dir, tmp string, m *catalog.Manifest) error {
	if err := writeManifest(fs, tmp, m); err != nil {
		return err
	}
	if err := fsyncDir(fs, tmp); err != nil {
		return err
	}
	final := filepath.Join(dir, catalog.DirName(m.Iter))
	if err := fs.RemoveAll(final); err != nil { // unpublished leftovers
		return err
	}
	if err := fs.Rename(tmp, final); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, final, err)
	}
	return fsyncDir(fs, dir)
}

// shardWriter writes the shards of one Persist.
type shardWriter struct {
	ctx context.Context
	fs  vfs.FS
	src Source
	o   Options
	rw  *rateWriter
}

// write fetches owner's shard of iter from the first of holders that
// sends it whole into tmp, fsynced; base is the bytes done before it. A
// failure of the file system stops at once; a holder's failure tries the
// next.
func (sw *shardWriter) write(tmp string, owner int, iter int64, holders []int, base int64) (catalog.Shard, error) {
	name := catalog.ShardName(owner)
	path := filepath.Join(tmp, name)
	var errs []error
	prog := func(n int64) {
		if sw.o.Progress != nil {
			sw.o.Progress(base + n)
		}
	}
	for _, h := range holders {
		f, err := sw.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return catalog.Shard{}, fmt.Errorf("creating %s: %w", path, err)
		}
		sw.rw.w, sw.rw.werr = f, nil
		got, err := sw.src.Fetch(sw.ctx, h, owner, iter, sw.rw, prog)
		local := sw.rw.werr // the disk failed, not the sender
		if err == nil {
			local = f.Sync()
			err = local
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			local, err = cerr, cerr
		}
		if local != nil {
			return catalog.Shard{}, fmt.Errorf("writing rank %d's shard of iteration %d to %s: %w", owner, iter, path, local)
		}
		if err == nil {
			return catalog.Shard{Rank: owner, File: filepath.Join(catalog.DirName(iter), name), Len: got.Len, CRC32C: got.CRC32C, XXH3: got.XXH3, Format: got.Format}, nil
		}
		errs = append(errs, fmt.Errorf("from rank %d: %w", h, err))
		if sw.ctx.Err() != nil {
			break
		}
	}
	return catalog.Shard{}, agentsErr(sw.ctx, fmt.Errorf("rank %d's shard of iteration %d: %w", owner, iter, errors.Join(errs...)))
}

// Problem is one shard that failed verification.
type Problem struct {
	Iter int64
	Rank int
	File string
	Err  error
}

func (p Problem) Error() string {
	if p.Rank < 0 {
		return fmt.Sprintf("iteration %d (%s): %v", p.Iter, p.File, p.Err)
	}
	return fmt.Sprintf("iteration %d, rank %d (%s): %v", p.Iter, p.Rank, p.File, p.Err)
}

// CheckShard re-hashes one shard file against its catalog record; it
// returns the bytes read.
func CheckShard(dir string, s catalog.Shard, progress func(int64)) (int64, error) {
	n, crc, x, err := hashFile(filepath.Join(dir, s.File), progress)
	if err != nil {
		return n, err
	}
	switch {
	case n != s.Len:
		return n, fmt.Errorf("length %d, catalog says %d", n, s.Len)
	case crc != s.CRC32C:
		return n, fmt.Errorf("CRC32C %08x, catalog says %08x", crc, s.CRC32C)
	case x != s.XXH3:
		return n, fmt.Errorf("XXH3 %016x, catalog says %016x", x, s.XXH3)
	}
	return n, nil
}

// hashFile reads a file in pieces and returns its length, CRC32C and
// XXH3, calling progress with the bytes read.
func hashFile(path string, progress func(int64)) (int64, uint32, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	hx := xxh3.New()
	tab := crc32.MakeTable(crc32.Castagnoli)
	var crc uint32
	buf := make([]byte, 4<<20)
	var n int64
	for {
		k, err := f.Read(buf)
		if k > 0 {
			_, _ = hx.Write(buf[:k])
			crc = crc32.Update(crc, tab, buf[:k])
			n += int64(k)
			if progress != nil {
				progress(n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, 0, 0, err
		}
	}
	return n, crc, hx.Sum64(), nil
}

// ReadShard reads rank's shard of m and checks it against the catalog
// (length, CRC32C, XXH3); a mismatch is refused.
func ReadShard(dir string, m *catalog.Manifest, rank int) ([]byte, catalog.Shard, error) {
	return ReadShardProgress(dir, m, rank, nil)
}

// ReadShardProgress is ReadShard calling progress with the bytes read.
func ReadShardProgress(dir string, m *catalog.Manifest, rank int, progress func(int64)) ([]byte, catalog.Shard, error) {
	var s *catalog.Shard
	for i := range m.Shards {
		if m.Shards[i].Rank == rank {
			s = &m.Shards[i]
		}
	}
	if s == nil {
		return nil, catalog.Shard{}, fmt.Errorf("persisted iteration %d has no shard of rank %d (world %d)", m.Iter, rank, m.World)
	}
	data, err := readFile(filepath.Join(dir, s.File), s.Len, progress)
	if err != nil {
		return nil, *s, err
	}
	p := Problem{Iter: m.Iter, Rank: rank, File: s.File}
	tab := crc32.MakeTable(crc32.Castagnoli)
	switch {
	case int64(len(data)) != s.Len:
		p.Err = fmt.Errorf("length %d, catalog says %d", len(data), s.Len)
	case crc32.Checksum(data, tab) != s.CRC32C:
		p.Err = fmt.Errorf("CRC32C %08x, catalog says %08x", crc32.Checksum(data, tab), s.CRC32C)
	case xxh3.Hash(data) != s.XXH3:
		p.Err = fmt.Errorf("XXH3 %016x, catalog says %016x", xxh3.Hash(data), s.XXH3)
	}
	if p.Err != nil {
		return nil, *s, fmt.Errorf("refusing a corrupt persisted shard: %w", p)
	}
	return data, *s, nil
}

// Latest opens the catalog briefly and returns iteration iter's manifest
// (the latest if iter < 0).
func Latest(dir string, iter int64) (*catalog.Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, "catalog")); err != nil {
		return nil, fmt.Errorf("%s holds no catalog: %w", dir, catalog.ErrNone)
	}
	c, err := catalog.Open(dir, CatalogWait)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Get(iter)
}

// Keep returns which of iters (any order) prune keeps: the keep newest,
// every iteration divisible by every (> 0), and those pinned.
func Keep(all []*catalog.Manifest, keep int, every int64) map[int64]bool {
	its := make([]int64, 0, len(all))
	out := map[int64]bool{}
	for _, m := range all {
		its = append(its, m.Iter)
		for _, t := range m.Tags {
			if t == "pin" {
				out[m.Iter] = true
			}
		}
		if every > 0 && m.Iter%every == 0 {
			out[m.Iter] = true
		}
	}
	sort.Slice(its, func(i, j int) bool { return its[i] > its[j] })
	for i := 0; i < keep && i < len(its); i++ {
		out[its[i]] = true
	}
	return out
}

// readFile reads a whole file (at most want+1 bytes are expected) in
// pieces, calling progress.
func readFile(path string, want int64, progress func(int64)) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() != want {
		return nil, fmt.Errorf("%s: %d bytes, the catalog says %d", path, st.Size(), want)
	}
	data := make([]byte, want)
	var n int64
	for n < want {
		k, err := f.Read(data[n:min(want, n+8<<20)])
		n += int64(k)
		if progress != nil {
			progress(n)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w at byte %d of %d", path, err, n, want)
		}
	}
	return data, nil
}
