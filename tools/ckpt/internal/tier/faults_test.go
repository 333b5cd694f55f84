package tier

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/zeebo/xxh3"

	"trainwire.dev/tools/ckpt/internal/catalog"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/faults with the outputs seen")

// memSource serves shards from memory, as the agents would: the input side
// of Persist, not what these tests exercise.
type memSource struct {
	iter   int64
	shards [][]byte
}

func (s *memSource) World() int { return len(s.shards) }

func (s *memSource) Latest(context.Context) (int64, [][]int, error) {
	return s.iter, OwnHolders(len(s.shards)), nil
}

func (s *memSource) Fetch(_ context.Context, _, owner int, _ int64, w io.Writer, progress func(int64)) (Fetched, error) {
	b := s.shards[owner]
	for off := 0; off < len(b); off += 64 << 10 {
		if _, err := w.Write(b[off:min(len(b), off+64<<10)]); err != nil {
			return Fetched{}, err
		}
		progress(int64(min(len(b), off+64<<10)))
	}
	return Fetched{Len: int64(len(b)), XXH3: xxh3.Hash(b), CRC32C: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), Format: "raw"}, nil
}

func shardBytes(iter int64, rank, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int64(i*7+rank*13) + iter)
	}
	return b
}

func source(iter int64) *memSource {
	s := &memSource{iter: iter}
	for r := 0; r < 3; r++ {
		s.shards = append(s.shards, shardBytes(iter, r, 200<<10+r))
	}
	return s
}

var errnos = map[string]syscall.Errno{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO, "EROFS": syscall.EROFS}

var opKinds = map[string]errorfs.OpKind{"create": errorfs.OpCreate, "write": errorfs.OpFileWrite, "sync": errorfs.OpFileSync,
	"rename": errorfs.OpRename, "mkdir": errorfs.OpMkdirAll, "opendir": errorfs.OpOpenDir,
	"removeall": errorfs.OpRemoveAll, "list": errorfs.OpList}

// injector parses OP:PATH-SUBSTRING:ERRNO[:NTH]: the NTH (1-based,
// default 1) operation OP on a path containing the substring (DIR: on the
// tier's directory dir itself) fails with ERRNO, before it does anything.
func injector(spec, dir string) (errorfs.Injector, error) {
	f := strings.Split(spec, ":")
	if len(f) < 3 || len(f) > 4 {
		return nil, fmt.Errorf("fault %q: want OP:PATH:ERRNO[:NTH]", spec)
	}
	kind, ok := opKinds[f[0]]
	errno, ok2 := errnos[f[2]]
	nth := 1
	if len(f) == 4 {
		nth, _ = strconv.Atoi(f[3])
	}
	if !ok || !ok2 || nth < 1 {
		return nil, fmt.Errorf("fault %q: unknown op, errno or count", spec)
	}
	seen := 0
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		match := strings.Contains(op.Path, f[1])
		if f[1] == "DIR" {
			match = filepath.Clean(op.Path) == dir
		}
		if op.Kind != kind || !match {
			return nil
		}
		if seen++; seen != nth {
			return nil
		}
		return &os.PathError{Op: f[0], Path: op.Path, Err: errno}
	}), nil
}

// tornFS writes only the first left bytes into files whose path contains
// sub, then fails the write that crosses that point with EIO: a torn
// write as the writer sees it.
type tornFS struct {
	vfs.FS
	sub  string
	left int64
}

func (t *tornFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := t.FS.Create(name, c)
	if err != nil || !strings.Contains(name, t.sub) {
		return f, err
	}
	return &tornFile{File: f, fs: t}, nil
}

type tornFile struct {
	vfs.File
	fs *tornFS
}

func (f *tornFile) Write(p []byte) (int, error) {
	if int64(len(p)) <= f.fs.left {
		f.fs.left -= int64(len(p))
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:f.fs.left])
	f.fs.left = 0
	return n, &os.PathError{Op: "write", Path: "torn", Err: syscall.EIO}
}

// faultFS builds the file system a case's arguments ask for.
func faultFS(args []string, dir string) (vfs.FS, error) {
	fs := vfs.Default
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "fault":
			inj, err := injector(v, dir)
			if err != nil {
				return nil, err
			}
			fs = errorfs.Wrap(fs, inj)
		case "torn":
			sub, n, _ := strings.Cut(v, ":")
			left, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("torn=%s: want PATH:BYTES", v)
			}
			fs = &tornFS{FS: fs, sub: sub, left: left}
		}
	}
	return fs, nil
}

// state describes dir as the readers see it: the iterations the catalog
// names, whether each restores byte-exact, and what else lies there.
func state(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	c, err := catalog.Open(dir, CatalogWait)
	if err != nil {
		t.Fatal(err)
	}
	_, all, err := Named(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		exact := "byte-exact"
		for r := 0; r < m.World; r++ {
			b, _, err := ReadShard(dir, m, r)
			if err != nil {
				exact = "UNREADABLE: " + err.Error()
			} else if !bytes.Equal(b, source(m.Iter).shards[r]) {
				exact = fmt.Sprintf("rank %d DIFFERS", r)
			}
		}
		out = append(out, fmt.Sprintf("published %d: %d shards, %s", m.Iter, len(m.Shards), exact))
	}
	ents, _ := os.ReadDir(dir)
	var other []string
	for _, e := range ents {
		n := e.Name()
		if it, ok := catalog.ParseIterDir(n); ok {
			named := false
			for _, m := range all {
				named = named || m.Iter == it
			}
			if named {
				continue
			}
		}
		if n == "catalog" || n == ".lock" {
			continue
		}
		if strings.HasPrefix(n, ".tmp-") {
			n = ".tmp-…"
		}
		other = append(other, n)
	}
	sort.Strings(other)
	out = append(out, "unpublished: "+strings.Join(append(other, "-")[:max(1, len(other))], " "))
	return strings.Join(out, "\n")
}

// errName names the errno an error carries, for a stable expected output.
func errName(err error) string {
	for name, e := range errnos {
		if errors.Is(err, e) {
			return name
		}
	}
	return err.Error()
}

// runCase runs one command of testdata/faults on dir.
func runCase(t *testing.T, dir, cmd string, args []string) string {
	t.Helper()
	switch cmd {
	case "persist":
		iter := int64(1)
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "iter="); ok {
				iter, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		fs, err := faultFS(args, dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Persist(context.Background(), dir, source(iter), Options{Run: "faults", FS: fs})
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				return "persist failed, blaming the agents (wrong): " + err.Error()
			}
			return fmt.Sprintf("persist failed: %s\n%s", errName(err), state(t, dir))
		}
		return fmt.Sprintf("persisted %d (%d shards, skipped %v)\n%s", res.Iter, res.Shards, res.Skipped, state(t, dir))
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

// TestPersistFaults runs testdata/faults in pebble's data-driven style:
// each case is a command and its arguments, "----", and the expected
// output; the cases of one file share one directory, in order. Each fault
// is injected once, deterministically, through pebble's errorfs (ENOSPC,
// EIO, EROFS on create, write, fsync, rename, mkdir, directory fsync; errorfs
// never fails a close) or a
// torn write; after every one, the iterations published before are
// intact and byte-exact, the failed iteration is not published, and the
// next clean persist publishes it. -rewrite rewrites the expected
// outputs.
func TestPersistFaults(t *testing.T) {
	path := filepath.Join("testdata", "faults")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rewritten []string
	for i, block := range strings.Split(strings.TrimSpace(string(raw)), "\n\n\n") {
		head, want, ok := strings.Cut(block, "\n----")
		if !ok {
			t.Fatalf("%s: case %d has no ----", path, i+1)
		}
		var cmdline string
		for _, l := range strings.Split(head, "\n") {
			if !strings.HasPrefix(l, "#") {
				cmdline = l
			}
		}
		f := strings.Fields(cmdline)
		got := runCase(t, dir, f[0], f[1:])
		if *rewrite {
			rewritten = append(rewritten, head+"\n----\n"+got)
			continue
		}
		if strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("%s case %d (%s):\ngot:\n%s\nwant:\n%s", path, i+1, cmdline, got, want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.Join(rewritten, "\n\n\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
