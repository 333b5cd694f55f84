package trace

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// IsTrace reports whether a file name looks like a trace this package
// reads (sidecars *.meta.json are not traces).
func IsTrace(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	if strings.HasSuffix(base, ".meta.json") || strings.HasSuffix(base, ".meta.json.gz") {
		return false
	}
	return strings.HasSuffix(base, ".json") || strings.HasSuffix(base, ".json.gz") || strings.HasSuffix(base, ".gz")
}

// Expand turns files and directories into the trace files they hold, in
// a stable order. "-" stays as is (stdin).
func Expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if a == "-" {
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && IsTrace(p) {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no .json or .json.gz traces in the directory", a)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// Open opens a trace file, decompressing gzip (detected by its magic
// bytes, whatever the name); "-" is stdin.
func Open(name string, stdin io.Reader) (io.Reader, func() error, error) {
	var src io.Reader
	closeFn := func() error { return nil }
	if name == "-" {
		src = stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		src, closeFn = f, f.Close
	}
	br := bufio.NewReaderSize(src, 64<<10)
	magic, _ := br.Peek(2)
	var r io.Reader = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			_ = closeFn()
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		r = zr
	}
	a := newAhead(r)
	return a, func() error { a.stop(); return closeFn() }, nil
}

var (
	rankName = regexp.MustCompile(`(?i)rank[-_]?(\d+)`)
	numDir   = regexp.MustCompile(`^\d+$`)
)

// ResolveRank is the one rule every verb uses for a trace file's rank:
// the --rank flag (flag ≥ 0), then the trace's distributedInfo (info, read
// at its start, or tail, found at its end), then the file name, then the
// file's position among the inputs (index; HTA's default for a single
// file is rank 0, and distinct files stay distinct).
func ResolveRank(flag int64, info *Info, tail int64, name string, index int) int64 {
	switch {
	case flag >= 0:
		return flag
	case info.Rank >= 0:
		return info.Rank
	case tail >= 0:
		return tail
	}
	if r := RankFromName(name); r >= 0 {
		return r
	}
	return int64(index)
}

// RankFromName finds a rank in a file name ("rank-3.json",
// "worker0.rank_1.pt.trace.json") or, for BytePS, in the parent directory
// ("traces/2/comm.json"); -1 when there is none.
func RankFromName(name string) int64 {
	if m := rankName.FindStringSubmatch(filepath.Base(name)); m != nil {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		return v
	}
	if d := filepath.Base(filepath.Dir(name)); numDir.MatchString(d) {
		v, _ := strconv.ParseInt(d, 10, 64)
		return v
	}
	return -1
}

var (
	tailBase = regexp.MustCompile(`"baseTimeNanoseconds"\s*:\s*(\d+)`)
	tailRank = regexp.MustCompile(`"distributedInfo"\s*:\s*\{[^}]*"rank"\s*:\s*(\d+)`)
)

// Tail reads the last 64 KiB of a plain (uncompressed, seekable) file for
// the keys older Kineto versions write after traceEvents, so a streaming
// reader can use them from the first event. It returns -1 for what it
// does not find.
func Tail(name string) (baseNS, rank int64) {
	baseNS, rank = -1, -1
	f, err := os.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	var magic [2]byte
	if n, _ := f.ReadAt(magic[:], 0); n == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return
	}
	st, err := f.Stat()
	if err != nil {
		return
	}
	off := max(0, st.Size()-64<<10)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return
	}
	if m := tailBase.FindSubmatch(buf); m != nil {
		baseNS, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := tailRank.FindSubmatch(buf); m != nil {
		rank, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	return
}
