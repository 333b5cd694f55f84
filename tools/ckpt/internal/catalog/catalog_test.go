package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPublishListDeleteReopen(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []int64{12, 3, 100} {
		m := &Manifest{Iter: it, World: 2, Run: "r", Tags: []string{"t"}, Shards: []Shard{
			{Rank: 0, File: DirName(it) + "/" + ShardName(0), Len: 5, CRC32C: 1, XXH3: 2, Format: "raw"},
			{Rank: 1, File: DirName(it) + "/" + ShardName(1), Len: 6, CRC32C: 3, XXH3: 4, Format: "raw"}}}
		if err := c.Publish(m); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.List()
	if err != nil || len(all) != 3 || all[0].Iter != 3 || all[2].Iter != 100 {
		t.Fatalf("list: %v %+v", err, all)
	}
	if m, err := c.Get(-1); err != nil || m.Iter != 100 {
		t.Fatalf("latest: %v %+v", err, m)
	}
	if s, err := c.Shard(12, 1); err != nil || s.Len != 6 || s.File != "iter-000000000012/rank-00001.shard" {
		t.Fatalf("shard: %v %+v", err, s)
	}
	if err := c.Delete(12, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Shard(12, 1); !errors.Is(err, ErrNone) {
		t.Fatalf("deleted shard key still there: %v", err)
	}
	// A second opener waits for the first (pebble's lock), then gives up.
	if _, err := Open(dir, 50*time.Millisecond); err == nil {
		t.Fatal("a second Open succeeded while the catalog is open")
	}
	c.Close()
	c, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all, _ = c.List()
	if len(all) != 1 || all[0].Iter != 3 {
		t.Fatalf("after reopen: %+v", all)
	}
	if _, err := c.Get(12); !errors.Is(err, ErrNone) {
		t.Fatalf("get deleted: %v", err)
	}
	if it, ok := ParseIterDir(DirName(42)); !ok || it != 42 {
		t.Fatal("ParseIterDir")
	}
	if _, ok := ParseIterDir(".tmp-iter-1"); ok {
		t.Fatal("ParseIterDir accepted a temp dir")
	}
}

// A flipped byte in an sstable is an error wrapping ErrCorrupt that names
// the catalog and the rebuild verb, not pebble's Fatalf panic.
func TestCorruptionIsAnError(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(&Manifest{Iter: 1, World: 1, Shards: []Shard{{Rank: 0, File: DirName(1) + "/" + ShardName(0)}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Flush(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ssts, _ := filepath.Glob(filepath.Join(dir, "catalog", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sstable")
	}
	for _, p := range ssts {
		b, _ := os.ReadFile(p)
		b[40] ^= 0x40
		_ = os.WriteFile(p, b, 0o644)
	}
	c, err = Open(dir, time.Second)
	if err == nil {
		defer c.Close()
		_, err = c.List()
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, "catalog")) || !strings.Contains(err.Error(), "ckpt catalog rebuild") {
		t.Fatalf("a corrupt sstable: %v", err)
	}
}
