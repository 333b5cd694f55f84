package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"trainwire.dev/tools/ckpt/internal/catalog"
)

// writeManifest writes m as iteration directory d's manifest file and
// fsyncs it.
func writeManifest(fs vfs.FS, d string, m *catalog.Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	path := filepath.Join(d, catalog.ManifestName)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readManifest reads the manifest file of iteration directory name (of
// iteration iter) and checks that it names that iteration's shard files.
func readManifest(dir, name string, iter int64) (*catalog.Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, name, catalog.ManifestName))
	if err != nil {
		return nil, err
	}
	m := &catalog.Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", catalog.ManifestName, err)
	}
	if err := checkManifest(m, iter); err != nil {
		return nil, fmt.Errorf("%s: %w", catalog.ManifestName, err)
	}
	return m, nil
}

// checkManifest checks that m is iteration iter's and names one shard
// file per rank, each in iter's directory.
func checkManifest(m *catalog.Manifest, iter int64) error {
	if m.Iter != iter {
		return fmt.Errorf("names iteration %d", m.Iter)
	}
	if len(m.Shards) == 0 || len(m.Shards) != m.World {
		return fmt.Errorf("names %d shards for world %d", len(m.Shards), m.World)
	}
	for i, s := range m.Shards {
		if s.Rank != i || s.File != filepath.Join(catalog.DirName(iter), catalog.ShardName(i)) {
			return fmt.Errorf("shard %d is rank %d in %q", i, s.Rank, s.File)
		}
	}
	return nil
}

// Rebuilt is what Rebuild did.
type Rebuilt struct {
	// Published are the iterations the new catalog names.
	Published []*catalog.Manifest
	// Left are the iteration directories left out, with the reason.
	Left []Problem
	// FromShards are the published iterations whose entry was taken from
	// their shard files (no manifest file, no readable old entry).
	FromShards []int64
	// Old is where the previous catalog was moved ("" if there was none).
	Old string
	// OldErr is why the previous catalog could not be read (nil if it could).
	OldErr error
}

// RebuildOptions tune Rebuild.
type RebuildOptions struct {
	// Rehash checks every shard's CRC32C and XXH3 against its manifest
	// (else its length only).
	Rehash bool
	// Format tells a shard's format from its first bytes. It is used for
	// a directory without a manifest file (written by a ckpt older than
	// manifests) that the old catalog cannot name: its entry is taken from
	// the shard files alone (ranks from the file names, which must be
	// 0…N−1; length and digests computed from the files, so damage since
	// they were written cannot be told; run id and tags unknown; the
	// directory's time), and its manifest file written.
	Format func(head []byte) string
	// Progress, if set, is called with the bytes hashed so far.
	Progress func(int64)
}

// Quarantine is the prefix Rebuild gives the iteration directories it
// leaves out of the catalog (quarantine-iter-…), so that no prune or
// persist removes them before someone looks.
const Quarantine = "quarantine-"

// Rebuild builds a new catalog from the iteration directories of dir: an
// iteration is published when its manifest file (or, for a directory
// written before manifests existed, the previous catalog's entry if that
// catalog can still be read, else its shard files: RebuildOptions.Format)
// names every rank's shard and every shard file matches its record. The
// other directories are left out (Rebuilt.Left) and renamed with the
// Quarantine prefix. The new catalog is built beside the old one and
// swapped in by renames; the old one is kept as catalog.corrupt-TIME
// (catalog.old-TIME when it could be read). The caller holds the lock.
func Rebuild(ctx context.Context, dir string, o RebuildOptions) (Rebuilt, error) {
	var res Rebuilt
	old, hadOld := oldCatalog(dir, &res)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return res, err
	}
	var done int64
	for _, e := range ents {
		it, ok := catalog.ParseIterDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		m, err := rebuildManifest(dir, e.Name(), it, old[it], o, &res)
		if err != nil {
			res.Left = append(res.Left, Problem{Iter: it, Rank: -1, File: e.Name(), Err: err})
			continue
		}
		if p := checkShards(dir, m, it, o, &done); p != nil {
			res.Left = append(res.Left, *p)
			continue
		}
		res.Published = append(res.Published, m)
	}
	sort.Slice(res.Published, func(i, j int) bool { return res.Published[i].Iter < res.Published[j].Iter })
	if err := quarantine(dir, res.Left); err != nil {
		return res, err
	}
	return res, swapCatalog(dir, &res, hadOld)
}

// oldCatalog reads the previous catalog's manifests by iteration, if there
// is one and it can be read (res.OldErr says why not).
func oldCatalog(dir string, res *Rebuilt) (map[int64]*catalog.Manifest, bool) {
	old := map[int64]*catalog.Manifest{}
	if _, err := os.Stat(filepath.Join(dir, "catalog")); err != nil {
		return old, false
	}
	c, err := catalog.Open(dir, CatalogWait)
	if err == nil {
		var all []*catalog.Manifest
		all, err = c.List()
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		for _, m := range all {
			old[m.Iter] = m
		}
	}
	res.OldErr = err
	return old, true
}

// rebuildManifest is iteration it's manifest: its manifest file, else the
// old catalog's entry when it checks, else one made from its shard files
// (and written beside them).
func rebuildManifest(dir, name string, it int64, old *catalog.Manifest, o RebuildOptions, res *Rebuilt) (*catalog.Manifest, error) {
	m, err := readManifest(dir, name, it)
	if !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	if old != nil && checkManifest(old, it) == nil {
		return old, nil
	}
	m, err = fromShards(dir, name, it, o.Format)
	if err == nil {
		err = writeManifest(vfs.Default, filepath.Join(dir, name), m)
	}
	if err == nil {
		res.FromShards = append(res.FromShards, it)
	}
	return m, err
}

// checkShards checks every shard file of m against its record: its hash
// (RebuildOptions.Rehash, counting progress in done) or its length. It
// returns the first problem.
func checkShards(dir string, m *catalog.Manifest, it int64, o RebuildOptions, done *int64) *Problem {
	for _, s := range m.Shards {
		var err error
		if o.Rehash {
			base := *done
			var n int64
			n, err = CheckShard(dir, s, func(n int64) {
				if o.Progress != nil {
					o.Progress(base + n)
				}
			})
			*done += n
		} else if st, serr := os.Stat(filepath.Join(dir, s.File)); serr != nil {
			err = serr
		} else if st.Size() != s.Len {
			err = fmt.Errorf("length %d, the manifest says %d", st.Size(), s.Len)
		}
		if err != nil {
			return &Problem{Iter: it, Rank: s.Rank, File: s.File, Err: err}
		}
	}
	return nil
}

// quarantine renames the directories left out with the Quarantine prefix
// (and a time when that name is taken), and points their problems at the
// new names.
func quarantine(dir string, left []Problem) error {
	for i, p := range left {
		d := catalog.DirName(p.Iter)
		q := Quarantine + d
		if _, err := os.Stat(filepath.Join(dir, q)); err == nil {
			q += "-" + time.Now().UTC().Format("20060102T150405.000000000Z")
		}
		if err := os.Rename(filepath.Join(dir, d), filepath.Join(dir, q)); err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(p.File, d+"/"); ok {
			left[i].File = q + "/" + rest
		} else {
			left[i].File = q
		}
	}
	return nil
}

// swapCatalog builds the new catalog of res.Published in a temporary
// directory (Cleanup removes it if this process is killed) and swaps it
// in, keeping the old one as catalog.old-TIME or catalog.corrupt-TIME.
func swapCatalog(dir string, res *Rebuilt, hadOld bool) error {
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-catalog-%d", os.Getpid()))
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c, err := catalog.Open(tmp, 0)
	if err != nil {
		return err
	}
	for _, m := range res.Published {
		if err := c.Publish(m); err != nil {
			c.Close()
			return err
		}
	}
	if err := c.Close(); err != nil {
		return err
	}
	if hadOld {
		kind := "old"
		if errors.Is(res.OldErr, catalog.ErrCorrupt) {
			kind = "corrupt"
		}
		res.Old = filepath.Join(dir, fmt.Sprintf("catalog.%s-%s", kind, time.Now().UTC().Format("20060102T150405.000000000Z")))
		if err := os.Rename(filepath.Join(dir, "catalog"), res.Old); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(tmp, "catalog"), filepath.Join(dir, "catalog")); err != nil {
		return err
	}
	return fsyncDir(vfs.Default, dir)
}

// fromShards makes the manifest of iteration directory name from its
// shard files (RebuildOptions.FromShards).
func fromShards(dir, name string, iter int64, format func([]byte) string) (*catalog.Manifest, error) {
	ents, err := os.ReadDir(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	m := &catalog.Manifest{Iter: iter, Created: st.ModTime().UTC()}
	for _, e := range ents {
		var r int
		if _, err := fmt.Sscanf(e.Name(), "rank-%05d.shard", &r); err != nil || e.Name() != catalog.ShardName(r) {
			continue
		}
		if r != len(m.Shards) {
			return nil, fmt.Errorf("the shard files are not ranks 0…N−1: %s after %d files", e.Name(), len(m.Shards))
		}
		file := filepath.Join(name, e.Name())
		n, crc, x, err := hashFile(filepath.Join(dir, file), nil)
		if err != nil {
			return nil, err
		}
		head := make([]byte, 64)
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		k, _ := f.Read(head)
		f.Close()
		sh := catalog.Shard{Rank: r, File: file, Len: n, CRC32C: crc, XXH3: x, Format: "raw"}
		if format != nil {
			sh.Format = format(head[:k])
		}
		m.Shards = append(m.Shards, sh)
		m.Bytes += n
	}
	if len(m.Shards) == 0 {
		return nil, errors.New("no shard files")
	}
	m.World = len(m.Shards)
	return m, nil
}
