// Package catalog is the persistent tier's index: a pebble database that
// names every published checkpoint (its manifest, where each rank's shard
// lies, sizes, CRC32C and XXH3 digests, retention tags). A checkpoint
// exists for readers only once its catalog entry is committed (one synced
// pebble batch, written after every shard file is durable); anything in
// the directory the catalog does not name is ignored.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Shard is one rank's shard of a persisted checkpoint.
type Shard struct {
	Rank   int    `json:"rank"`
	File   string `json:"file"` // relative to the persistent directory
	Len    int64  `json:"len"`
	CRC32C uint32 `json:"crc32c"`
	XXH3   uint64 `json:"xxh3"`
	Format string `json:"format"`
}

// Manifest is one persisted checkpoint.
type Manifest struct {
	Iter    int64     `json:"iter"`
	World   int       `json:"world"`
	Run     string    `json:"run"`
	Created time.Time `json:"created"`
	Bytes   int64     `json:"bytes"`
	Tags    []string  `json:"tags,omitempty"`
	Shards  []Shard   `json:"shards"`
}

// DirName is the directory (relative to the persistent directory) that
// holds iteration iter's shard files.
func DirName(iter int64) string { return fmt.Sprintf("iter-%012d", iter) }

// ShardName is rank's shard file inside DirName.
func ShardName(rank int) string { return fmt.Sprintf("rank-%05d.shard", rank) }

// ManifestName is the file inside DirName that holds the iteration's
// Manifest as JSON (the value its catalog entry has), written with the
// shard files, so that the catalog can be rebuilt from the directories.
const ManifestName = "manifest.json"

// Catalog is an open catalog.
type Catalog struct {
	db   *pebble.DB
	dir  string // the persistent directory
	path string // dir/catalog
}

const (
	prefixManifest = "m/"
	prefixShard    = "s/"
)

func mkey(iter int64) []byte { return fmt.Appendf(nil, "%s%020d", prefixManifest, iter) }
func skey(iter int64, rank int) []byte {
	return fmt.Appendf(nil, "%s%020d/%08d", prefixShard, iter, rank)
}

type quiet struct{}

func (quiet) Infof(string, ...any) {}
func (quiet) Errorf(format string, args ...any) {
	slog.Default().Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf panics (pebble expects it not to return); the Catalog's methods
// turn that panic into an error (guard).
func (quiet) Fatalf(format string, args ...any) {
	panic(fatal(fmt.Sprintf("pebble: "+format, args...)))
}

type fatal string

// ErrCorrupt is wrapped by the error of every Catalog method (and Open)
// that finds the catalog's files damaged (a checksum mismatch in an
// sstable, the MANIFEST or the WAL) or pebble failing fatally. The
// catalog can be rebuilt from the iteration directories (Rebuild).
var ErrCorrupt = errors.New("the catalog is corrupt")

// corrupt wraps err (a pebble corruption or fatal error) as ErrCorrupt,
// naming the catalog and the way out.
func corrupt(dir string, err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n") // pebble's details follow on more lines
	return fmt.Errorf("%w: %s: %s (the shard files are not affected: rebuild the catalog from them with `ckpt catalog rebuild --dir %s`)",
		ErrCorrupt, filepath.Join(dir, "catalog"), msg, dir)
}

// guard turns a panic of pebble (quiet.Fatalf) into an error, and a
// corruption error into ErrCorrupt; every exported method defers it.
func (c *Catalog) guard(err *error) {
	if r := recover(); r != nil {
		if _, ok := r.(fatal); !ok {
			if e, ok := r.(error); !ok || !pebble.IsCorruptionError(e) {
				panic(r)
			}
		}
		*err = corrupt(c.dir, fmt.Errorf("%v", r))
		return
	}
	if *err != nil && !errors.Is(*err, ErrCorrupt) && pebble.IsCorruptionError(*err) {
		*err = corrupt(c.dir, *err)
	}
}

// Open opens (creating it if needed) the catalog under dir/catalog. Pebble
// allows one opener at a time; Open retries for up to wait while another
// process holds it (every opener holds it briefly). Damaged files are an
// error wrapping ErrCorrupt, never a crash.
func Open(dir string, wait time.Duration) (*Catalog, error) {
	return open(dir, filepath.Join(dir, "catalog"), wait)
}

func open(dir, path string, wait time.Duration) (c *Catalog, err error) {
	c = &Catalog{dir: dir, path: path}
	defer func() {
		if err != nil {
			c = nil
		}
	}()
	defer c.guard(&err)
	opts := &pebble.Options{
		Logger: quiet{},
		// Corruption found on a read is returned by that read (and so
		// becomes ErrCorrupt); pebble's default would call Fatalf.
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
	}
	deadline := time.Now().Add(wait)
	for {
		db, err := pebble.Open(path, opts)
		if err == nil {
			c.db = db
			return c, nil
		}
		if pebble.IsCorruptionError(err) {
			return nil, corrupt(dir, err)
		}
		if !strings.Contains(err.Error(), "lock") || time.Now().After(deadline) {
			return nil, fmt.Errorf("catalog %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close closes the catalog.
func (c *Catalog) Close() (err error) {
	defer c.guard(&err)
	return c.db.Close()
}

// Publish records m in one synced batch: the manifest and one key per
// shard. Until it returns, readers do not see m.
func (c *Catalog) Publish(m *Manifest) (err error) {
	defer c.guard(&err)
	b := c.db.NewBatch()
	defer b.Close()
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := b.Set(mkey(m.Iter), v, nil); err != nil {
		return err
	}
	for _, s := range m.Shards {
		sv, _ := json.Marshal(s)
		if err := b.Set(skey(m.Iter, s.Rank), sv, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// Delete removes the entries of iters in one synced batch.
func (c *Catalog) Delete(iters ...int64) (err error) {
	defer c.guard(&err)
	b := c.db.NewBatch()
	defer b.Close()
	for _, it := range iters {
		if err := b.Delete(mkey(it), nil); err != nil {
			return err
		}
		if err := b.DeleteRange(skey(it, 0), skey(it+1, 0), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// List returns every manifest, oldest iteration first.
func (c *Catalog) List() (out []*Manifest, err error) {
	defer c.guard(&err)
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefixManifest), UpperBound: []byte("m0")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		m := &Manifest{}
		if err := json.Unmarshal(it.Value(), m); err != nil {
			return nil, fmt.Errorf("catalog entry %q: %w", it.Key(), err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Iter < out[j].Iter })
	return out, it.Error()
}

// ErrNone is returned when the catalog has no (such) checkpoint.
var ErrNone = errors.New("no persisted checkpoint")

// Get returns iteration iter's manifest, or the latest one if iter < 0.
func (c *Catalog) Get(iter int64) (_ *Manifest, err error) {
	defer c.guard(&err)
	if iter < 0 {
		all, err := c.List()
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, ErrNone
		}
		return all[len(all)-1], nil
	}
	v, cl, err := c.db.Get(mkey(iter))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("iteration %d: %w", iter, ErrNone)
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	m := &Manifest{}
	if err := json.Unmarshal(v, m); err != nil {
		return nil, fmt.Errorf("catalog entry of iteration %d: %w", iter, err)
	}
	return m, nil
}

// Shard returns the shard record of rank in iteration iter (its own key).
func (c *Catalog) Shard(iter int64, rank int) (_ *Shard, err error) {
	defer c.guard(&err)
	v, cl, err := c.db.Get(skey(iter, rank))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("iteration %d has no shard of rank %d: %w", iter, rank, ErrNone)
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	s := &Shard{}
	return s, json.Unmarshal(v, s)
}

// ParseIterDir returns the iteration of a DirName, or false.
func ParseIterDir(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "iter-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}
