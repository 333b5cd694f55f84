package tier

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"trainwire.dev/tools/ckpt/internal/catalog"
)

func TestKeep(t *testing.T) {
	var all []*catalog.Manifest
	for _, it := range []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} {
		m := &catalog.Manifest{Iter: it}
		if it == 3 {
			m.Tags = []string{"pin"}
		}
		all = append(all, m)
	}
	k := Keep(all, 2, 4)
	var got []int64
	for it := range k {
		got = append(got, it)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if want := []int64{3, 4, 8, 9, 10}; !reflect.DeepEqual(got, want) {
		t.Fatalf("keep %v, want %v", got, want)
	}
}

func TestLockExcludes(t *testing.T) {
	dir := t.TempDir()
	un, err := Lock(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir, 100*time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("second lock: %v", err)
	}
	un()
	un2, err := Lock(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	un2()
}

func TestCheckShardAndCleanup(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, catalog.DirName(5))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, catalog.ShardName(0)), []byte("hello, shard"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A record whose digests do not match the file: verify and read refuse.
	s := catalog.Shard{Rank: 0, File: filepath.Join(catalog.DirName(5), catalog.ShardName(0)), Len: 12}
	if _, err := CheckShard(dir, s, nil); err == nil {
		t.Fatal("a zero digest record verified")
	}
	m := &catalog.Manifest{Iter: 5, World: 1, Shards: []catalog.Shard{s}}
	if _, _, err := ReadShard(dir, m, 0); err == nil {
		t.Fatal("ReadShard accepted a mismatching shard")
	}
	_ = os.MkdirAll(filepath.Join(dir, ".tmp-iter-000000000006-1"), 0o755)
	_ = os.MkdirAll(filepath.Join(dir, catalog.DirName(7)), 0o755)
	// Persist's cleanup removes temporary directories only; prune's also
	// the iteration directories the catalog does not name.
	gone, err := Cleanup(dir, map[int64]bool{5: true}, false)
	if err != nil || len(gone) != 1 || gone[0] != ".tmp-iter-000000000006-1" {
		t.Fatalf("persist's cleanup removed %v (%v)", gone, err)
	}
	if gone, err := Cleanup(dir, map[int64]bool{5: true}, true); err != nil || len(gone) != 1 || gone[0] != catalog.DirName(7) {
		t.Fatalf("prune's cleanup removed %v (%v)", gone, err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatal("cleanup removed a named iteration")
	}
}
