package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"runtime"
	"strings"
)

// hostID names the network namespace this process runs in, as seen by
// Unix sockets: two ranks with the same host id can reach each other's
// abstract Unix sockets. It hashes the hostname, the kernel's boot id and
// the inode of this process's network namespace (/proc/self/ns/net), so
// two containers or two `ip netns` namespaces on one machine differ.
func hostID() string {
	h := sha256.New()
	name, _ := os.Hostname()
	h.Write([]byte(name))
	h.Write([]byte{0})
	if runtime.GOOS == "linux" {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			h.Write([]byte(strings.TrimSpace(string(b))))
		}
		h.Write([]byte{0})
		if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
			h.Write([]byte(ns))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
