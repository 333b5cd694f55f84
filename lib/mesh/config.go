package mesh

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"trainwire.dev/lib/launch"
)

// Defaults for Config's zero values.
const (
	// DefaultBind is the data listener's address when Config.Bind is empty.
	DefaultBind = "127.0.0.1"
	// DefaultTimeout bounds every blocking step and every send and receive.
	DefaultTimeout = 60 * time.Second
	// DefaultConnectTimeout bounds the whole rendezvous.
	DefaultConnectTimeout = 120 * time.Second
	// DefaultSocketBuffer is the SO_SNDBUF/SO_RCVBUF asked for on data
	// connections (the kernel caps it at net.core.wmem_max/rmem_max).
	DefaultSocketBuffer = 4 << 20
)

// Config says how to open a mesh.
type Config struct {
	// Env is this process's identity: rank, world, rank 0's rendezvous
	// address (MasterAddr:MasterPort) and run id.
	Env launch.Env
	// Bind is the host (IP or name) the data listener binds, port chosen
	// by the kernel; default 127.0.0.1. An unspecified address (0.0.0.0,
	// ::) listens everywhere and advertises the address this rank uses to
	// reach rank 0. A non-loopback Bind (and a non-loopback master
	// address on rank 0) is refused unless Token is set.
	Bind string
	// Token is the shared job secret every connection proves with an
	// HMAC-SHA256 challenge-response, both ways. Empty means a fixed
	// public key: loopback only.
	Token []byte
	// Timeout bounds every blocking step: each Send and Recv call (one
	// that does not finish within Timeout is an error naming the peer),
	// each handshake, and, halved (at least 1 s), the silence allowed on a
	// control connection. Default DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds Open as a whole: ranks that start before rank
	// 0 listens retry with backoff until it passes. Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// NoUnix turns off Unix sockets between ranks of the same host (same
	// network namespace); by default they are used, as they are faster
	// than loopback TCP.
	NoUnix bool
	// SocketBuffer is the SO_SNDBUF/SO_RCVBUF size for data connections;
	// 0 means DefaultSocketBuffer, negative leaves the kernel default.
	SocketBuffer int
	// Listener, if not nil, is rank 0's rendezvous listener, used instead
	// of listening at MasterAddr:MasterPort (tests, or a caller that owns
	// the port). Open does not close it before Close.
	Listener net.Listener
	// Log receives progress and refused connections; nil discards.
	Log *slog.Logger
	// Tolerant turns the job-wide abort off for peer failures: a rank
	// that dies, hangs past the heartbeat silence, or whose link fails
	// is dropped instead. Rank 0 tells every rank (a dropped rank that
	// is still alive learns it was dropped and aborts); Send and Recv to
	// a dropped rank fail at once with a *PeerError naming it; the
	// survivors keep working and Alive says who is left. When rank 0
	// itself dies the others drop it and go on, each then judging its
	// own links. Abort still fails the whole job. Default off.
	Tolerant bool
	// OnDead, if not nil, is called (on a goroutine of its own, once per
	// rank) when a tolerant mesh drops a rank, with the reason.
	OnDead func(rank int, reason error)
}

// Flags are the mesh's command-line flags, for embedding into a verb's
// kong struct next to launch.Flags:
//
//	Mesh mesh.Flags `embed:""`
type Flags struct {
	Bind           string        `help:"Address the data listener binds (port chosen by the kernel). Non-loopback needs --token." default:"127.0.0.1" env:"TRAINWIRE_BIND" envscope:"shared"`
	Token          string        `help:"Shared job token authenticating every connection (prefer the environment variable: flags show in ps)." env:"TRAINWIRE_TOKEN" envscope:"shared"`
	Timeout        time.Duration `help:"Deadline for every send, receive and blocking step; a peer silent this long is an error." default:"60s" env:"TRAINWIRE_TIMEOUT" envscope:"shared"`
	ConnectTimeout time.Duration `help:"Deadline for the whole rendezvous (ranks wait this long for rank 0)." default:"120s" env:"TRAINWIRE_CONNECT_TIMEOUT" envscope:"shared"`
	NoUnix         bool          `help:"Use TCP even between ranks on the same host." env:"TRAINWIRE_NO_UNIX" envscope:"shared"`
}

// Config returns the mesh configuration the flags describe for env.
func (f Flags) Config(env launch.Env, log *slog.Logger) Config {
	var tok []byte
	if f.Token != "" {
		tok = []byte(f.Token)
	}
	return Config{Env: env, Bind: f.Bind, Token: tok, Timeout: f.Timeout, ConnectTimeout: f.ConnectTimeout, NoUnix: f.NoUnix, Log: log}
}

// withDefaults fills zero values and checks what can be checked alone.
func (c Config) withDefaults() (Config, error) {
	if c.Bind == "" {
		c.Bind = DefaultBind
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.SocketBuffer == 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := c.Env
	if e.World < 1 {
		return c, fmt.Errorf("mesh: world size %d (must be at least 1)", e.World)
	}
	if e.Rank < 0 || e.Rank >= e.World {
		return c, fmt.Errorf("mesh: rank %d out of range for world size %d", e.Rank, e.World)
	}
	if e.World > 1 && c.Listener == nil && (e.MasterPort <= 0 || e.MasterPort > 65535) {
		return c, fmt.Errorf("mesh: rank 0's rendezvous port is not known (set --master host:port or MASTER_ADDR/MASTER_PORT)")
	}
	return c, nil
}

func (c Config) key() []byte {
	if len(c.Token) == 0 {
		return noTokenKey
	}
	return c.Token
}

// splitHost accepts "host" or "host:port" and returns the host.
func splitHost(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.Trim(s, "[]")
}

// isLoopback reports whether every address host names is a loopback one.
// Unspecified addresses (0.0.0.0, ::) and names that do not resolve are
// not loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// checkExposure refuses to listen on a non-loopback host without a token.
func (c Config) checkExposure(what, host string) error {
	if len(c.Token) == 0 && !isLoopback(host) {
		return fmt.Errorf("mesh: refusing to listen for %s on non-loopback address %q without a job token: set --token or TRAINWIRE_TOKEN on every rank (or bind 127.0.0.1 for a single-host job)", what, host)
	}
	return nil
}
