package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// AtomicFile is an output file that appears at its path only when Commit
// succeeds: it is written as a temporary file in the same directory
// (".NAME.tmp-…", so the rename cannot cross file systems), which Commit
// fsyncs and renames over the path, and Abort removes. A command that
// fails, is interrupted or is killed never leaves a half-written file at
// the path, and never damages what was there before.
//
//	f, err := cli.CreateAtomic(path)
//	if err != nil { return err }
//	defer f.Abort() // a no-op after Commit
//	… write f …
//	return f.Commit()
type AtomicFile struct {
	*os.File
	path string
	done bool
}

// CreateAtomic creates the temporary file of an AtomicFile for path, with
// the permissions os.Create gives (0666 less the umask).
func CreateAtomic(path string) (*AtomicFile, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%08x", base, os.Getpid(), rand.Uint32()))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating a temporary file beside %s: %w", path, err)
		}
		temps.Store(tmp, struct{}{})
		return &AtomicFile{File: f, path: path}, nil
	}
	return nil, fmt.Errorf("creating a temporary file beside %s: no free name", path)
}

// Path is the path the file will have after Commit.
func (f *AtomicFile) Path() string { return f.path }

// Commit makes the written file durable (fsync), renames it to its path
// and fsyncs the directory. On failure the temporary file is removed.
func (f *AtomicFile) Commit() error {
	if f.done {
		return fmt.Errorf("%s: already committed or aborted", f.path)
	}
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	temps.Delete(f.Name())
	f.done = true
	if d, err := os.Open(filepath.Dir(f.path)); err == nil {
		_ = d.Sync() // best effort: some file systems refuse a directory fsync
		d.Close()
	}
	return nil
}

// Abort closes and removes the temporary file; the path keeps what it
// held. It does nothing after Commit, so it can be deferred.
func (f *AtomicFile) Abort() {
	if f.done {
		return
	}
	f.done = true
	_ = f.Close()
	_ = os.Remove(f.Name())
	temps.Delete(f.Name())
}
