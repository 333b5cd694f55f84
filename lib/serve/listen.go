package serve

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Listen creates the sidecar's socket at path, mode 0600. It refuses an
// abstract name (@… or a leading NUL: any process of any user in the
// network namespace can reach those) and a directory that is not the
// job's: it must belong to this user and not be writable by group or
// others (a sticky /tmp included: another user could have put the path
// there first; use $XDG_RUNTIME_DIR or `mktemp -d`). A stale socket left at
// path by a dead sidecar is removed; anything else there is an error.
func Listen(path string) (*net.UnixListener, error) {
	if path == "" {
		return nil, errors.New("serve: no socket path (--socket or TRAINWIRE_SERVE_SOCKET)")
	}
	if strings.HasPrefix(path, "@") || strings.HasPrefix(path, "\x00") {
		return nil, fmt.Errorf("serve: socket %q: abstract socket names are refused (any user could connect); give a path", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("serve: socket %q: %w", path, err)
	}
	if err := checkDir(filepath.Dir(abs)); err != nil {
		return nil, fmt.Errorf("serve: socket %s: %w", abs, err)
	}
	if err := removeStale(abs); err != nil {
		return nil, fmt.Errorf("serve: socket %s: %w", abs, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: abs, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if err := os.Chmod(abs, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("serve: socket %s: %w", abs, err)
	}
	return ln, nil
}

// checkDir accepts a directory of this user's that only it can write.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("directory %s belongs to uid %d, not this user (%d): put the socket in a directory of the job's own", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("directory %s is writable by group or others (mode %v): put the socket in a directory of the job's own (e.g. mktemp -d)", dir, fi.Mode().Perm())
	}
	return nil
}

// removeStale removes a socket nobody listens on; refuses anything else.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("exists and is not a socket: refusing to replace it")
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("another sidecar is listening there")
	}
	return os.Remove(path)
}
