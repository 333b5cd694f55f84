package mesh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Transports of a link between two ranks.
const (
	TransportUnix = "unix"
	TransportTCP  = "tcp"
)

// PeerInfo is one rank's entry in the table rank 0 sends everyone.
type PeerInfo struct {
	// Rank is the rank.
	Rank int `json:"rank"`
	// TCP is its data listener, host:port.
	TCP string `json:"tcp"`
	// Unix is its abstract Unix socket ("@trainwire-…"), empty when it
	// has none (--no-unix, or not Linux).
	Unix string `json:"unix,omitempty"`
	// Host identifies its network namespace (hostname, boot id, netns).
	Host string `json:"host"`
	// Hostname and PID are for humans reading errors and logs.
	Hostname string `json:"hostname"`
	PID      int    `json:"pid"`
}

// Mesh is a full mesh of authenticated connections between the ranks of a
// job, plus a control channel from every rank to rank 0 that carries
// heartbeats and the job-wide abort. Send and Recv move bytes to and from
// one peer; package collective builds the collectives on them.
//
// A Mesh is safe for concurrent use with one restriction: at most one
// goroutine sends to a given peer at a time and at most one receives from
// it (Send and Recv each hold a per-peer lock, so more are serialised, in
// no defined order). Collectives must be called in the same order on all
// ranks.
type Mesh struct {
	cfg   Config
	rank  int
	world int
	log   *slog.Logger
	host  string

	table []PeerInfo
	peers []*peer // by rank; nil at this rank

	// Control plane.
	ctrl     *ctrlConn   // rank > 0: the connection to rank 0
	ctrls    []*ctrlConn // rank 0: by rank; nil at 0
	readyCh  chan int    // rank 0: READY arrivals during Open
	goCh     chan struct{}
	goOnce   sync.Once
	bgWG     sync.WaitGroup // control readers and heartbeats
	hbEvery  time.Duration
	silence  time.Duration
	grace    time.Duration
	dataLns  []net.Listener
	openDone chan struct{} // closed when Open ends (stops accept loops)
	openOnce sync.Once
	// acceptWork is the data listeners' accept loops and handshakes.
	acceptWork tracker

	abortMu   sync.Mutex // guards peers during Open, verdictV and dropped
	abortOnce sync.Once
	verdictV  *verdict
	aborted   chan struct{}
	dropped   map[int]*verdict // tolerant meshes: ranks dropped, and why

	closing    atomic.Bool
	closed     chan struct{}
	closeOnce  sync.Once
	closedOnce sync.Once

	counters counterSet
}

// Open joins the job described by cfg.Env: it runs the rendezvous through
// rank 0, connects the full mesh, and returns when every rank's mesh is up
// (so a failure anywhere during Open fails Open everywhere). A world of 1
// needs no network and returns at once. Errors naming a peer are
// *PeerError.
func Open(ctx context.Context, cfg Config) (*Mesh, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Mesh{
		cfg:      cfg,
		rank:     cfg.Env.Rank,
		world:    cfg.Env.World,
		log:      cfg.Log.With("rank", cfg.Env.Rank),
		host:     hostID(),
		peers:    make([]*peer, cfg.Env.World),
		aborted:  make(chan struct{}),
		closed:   make(chan struct{}),
		goCh:     make(chan struct{}),
		openDone: make(chan struct{}),
	}
	m.counters.init(m.world)
	// Heartbeats every Timeout/10 (50 ms to 2 s); a control connection
	// silent for Timeout/2 (at least 1 s, so a loaded machine's scheduling
	// hiccups are not taken for a hung rank) means the rank hung. Being
	// shorter than Timeout, it names a stopped rank before the data
	// timeouts of its neighbours, which would name whoever they wait on.
	m.hbEvery = min(max(cfg.Timeout/10, 50*time.Millisecond), 2*time.Second)
	m.silence = max(cfg.Timeout/2, 3*m.hbEvery, time.Second)
	m.grace = min(max(cfg.Timeout/4, 100*time.Millisecond), 5*time.Second)
	if m.world == 1 {
		m.endOpen()
		m.table = []PeerInfo{m.selfInfo("", "")}
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := m.open(ctx); err != nil {
		m.teardown()
		if ctx.Err() != nil && !isPeerError(err) {
			err = fmt.Errorf("mesh: open: %w", err)
		}
		return nil, err
	}
	m.log.Debug("mesh: ready", "world", m.world, "transport", m.Transport())
	return m, nil
}

func isPeerError(err error) bool {
	var pe *PeerError
	return errors.As(err, &pe)
}

func (m *Mesh) selfInfo(tcp, unix string) PeerInfo {
	name, _ := os.Hostname()
	return PeerInfo{Rank: m.rank, TCP: tcp, Unix: unix, Host: m.host, Hostname: name, PID: os.Getpid()}
}

// open runs the phases of Open; on error the caller tears down.
func (m *Mesh) open(ctx context.Context) error {
	tcpAddr, unixAddr, err := m.listen()
	if err != nil {
		return err
	}
	inbound := m.acceptData()
	if m.rank == 0 {
		err = m.rendezvousServer(ctx, tcpAddr, unixAddr)
	} else {
		err = m.rendezvousClient(ctx, tcpAddr, unixAddr)
	}
	if err != nil {
		return err
	}
	m.startControl()
	if err := m.connectData(ctx, inbound); err != nil {
		return err
	}
	if err := m.syncReady(ctx); err != nil {
		return err
	}
	m.endOpen()
	return nil
}

// endOpen stops accepting data connections.
func (m *Mesh) endOpen() {
	m.openOnce.Do(func() {
		close(m.openDone)
		for _, ln := range m.dataLns {
			_ = ln.Close()
		}
		m.acceptWork.stop(nil)
	})
}

// listen opens the data listeners: TCP on Bind:0, and an abstract Unix
// socket on Linux unless NoUnix. It returns the addresses to advertise
// (the TCP one may have an unspecified host, fixed up later).
func (m *Mesh) listen() (tcpAddr, unixAddr string, err error) {
	host := splitHost(m.cfg.Bind)
	if err := m.cfg.checkExposure("data connections", host); err != nil {
		return "", "", err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", "", fmt.Errorf("mesh: listen on %s: %w", host, err)
	}
	m.dataLns = append(m.dataLns, ln)
	tcpAddr = ln.Addr().String()
	if !m.cfg.NoUnix && runtime.GOOS == "linux" {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		name := "@trainwire-" + sanitize(m.cfg.Env.RunID) + "-" + hex.EncodeToString(rnd[:])
		uln, err := net.Listen("unix", name)
		if err != nil {
			m.log.Warn("mesh: no Unix socket, using TCP only", "err", err)
		} else {
			m.dataLns = append(m.dataLns, uln)
			unixAddr = name
		}
	}
	return tcpAddr, unixAddr, nil
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

// advertise replaces an unspecified host in a listener address by host.
func advertise(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() && host != "" {
		return net.JoinHostPort(host, port)
	}
	return addr
}

func (m *Mesh) masterAddr() string {
	host := m.cfg.Env.MasterAddr
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(splitHost(host), strconv.Itoa(m.cfg.Env.MasterPort))
}

// register is a rank's registration with rank 0.
type register struct {
	World int      `json:"world"`
	Info  PeerInfo `json:"info"`
}

// tableMsg is rank 0's answer to everyone.
type tableMsg struct {
	World int        `json:"world"`
	Peers []PeerInfo `json:"peers"`
}

// rendezvousServer is rank 0's side: accept every other rank's
// registration, check them, send everyone the table.
func (m *Mesh) rendezvousServer(ctx context.Context, tcpAddr, unixAddr string) error {
	ln, err := m.rendezvousListener()
	if err != nil {
		return err
	}
	self := m.selfInfo(advertise(tcpAddr, splitHost(m.masterAddr())), unixAddr)
	m.log.Debug("mesh: rendezvous: listening", "addr", ln.Addr().String(), "world", m.world)
	rv := &rendezvous{m: m, ln: ln, arrivals: make(chan arrival), fatal: make(chan error, 1), stop: make(chan struct{}),
		claimed: map[int]string{}, conns: make([]net.Conn, m.world)}
	rv.work.goLoop(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			rv.work.goConn(conn, rv.handle)
		}
	})
	// The rendezvous port is only needed until everyone has joined; when
	// we return, the accept loop and the handshakes in progress end too.
	defer func() {
		close(rv.stop)
		_ = ln.Close()
		rv.work.stop(rv.farewell)
	}()
	infos, err := rv.collect(ctx, self)
	if err != nil {
		return err
	}
	return rv.sendTable(infos)
}

// rendezvousListener is the listener of rank 0's rendezvous port: the
// configured one, or one on the master address.
func (m *Mesh) rendezvousListener() (net.Listener, error) {
	if m.cfg.Listener != nil {
		return m.cfg.Listener, nil
	}
	addr := m.masterAddr()
	if err := m.cfg.checkExposure("the rendezvous", splitHost(addr)); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mesh: rank 0: listen for the rendezvous on %s: %w", addr, err)
	}
	return ln, nil
}

// arrival is a rank registered with rank 0.
type arrival struct {
	conn net.Conn
	reg  register
}

// rendezvous is rank 0's state while the other ranks register: the
// handshakes in progress, the ranks claimed, and the ranks' control
// connections as they arrive.
type rendezvous struct {
	m        *Mesh
	ln       net.Listener
	arrivals chan arrival
	fatal    chan error // a misconfigured job: fails the rendezvous
	stop     chan struct{}
	work     tracker

	failMu  sync.Mutex
	failMsg string // set before stop closes when the rendezvous failed

	claimMu sync.Mutex
	claimed map[int]string // rank → the address that claimed it

	conns []net.Conn // by rank, as they arrive (collect's goroutine only)
}

// farewell tells a registered (or registering) rank why the rendezvous
// failed, if it did.
func (rv *rendezvous) farewell(conn net.Conn) {
	rv.failMu.Lock()
	msg := rv.failMsg
	rv.failMu.Unlock()
	if msg != "" {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = writeFrame(conn, msgError, []byte(msg))
	}
}

// handle takes one connection to the rendezvous port: handshake, checks,
// registration, then hands it to collect.
func (rv *rendezvous) handle(conn net.Conn) {
	m := rv.m
	remote := conn.RemoteAddr().String()
	h, err := serverHandshake(conn, m.cfg.key(), 0, m.cfg.Env.RunID, time.Now().Add(m.cfg.Timeout), func(h *hello) error {
		if h.Kind != kindRendezvous || h.To != 0 {
			return fmt.Errorf("rank 0's rendezvous port takes rendezvous connections, got %s for rank %d", h.Kind, h.To)
		}
		return nil
	})
	if err != nil {
		_ = conn.Close()
		m.log.Warn("mesh: refused rendezvous connection", "remote", remote, "err", err)
		return
	}
	// Authenticated: from here on a bad request is a misconfigured job,
	// not a stray, and fails the rendezvous everywhere.
	rv.work.authenticated(conn)
	if bad := rv.claim(h, remote); bad != nil {
		if rv.work.release(conn) {
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_ = writeFrame(conn, msgError, []byte(bad.Error()))
			_ = conn.Close()
		}
		select {
		case rv.fatal <- bad:
		default:
		}
		return
	}
	var reg register
	_ = conn.SetReadDeadline(time.Now().Add(m.cfg.Timeout))
	err = readExpect(conn, msgRegister, &reg)
	if !rv.work.release(conn) {
		return // stopped meanwhile: told why and closed
	}
	if err != nil || reg.Info.Rank != h.From || reg.World != m.world {
		m.log.Warn("mesh: bad registration", "remote", remote, "rank", h.From, "err", err)
		_ = conn.Close()
		rv.claimMu.Lock()
		delete(rv.claimed, h.From)
		rv.claimMu.Unlock()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	reg.Info.TCP = advertise(reg.Info.TCP, splitHost(remote))
	select {
	case rv.arrivals <- arrival{conn, reg}:
	case <-rv.stop:
		rv.farewell(conn)
		_ = conn.Close()
	}
}

// claim checks an authenticated rank's hello against the job (world size,
// rank range) and claims its rank for remote; the error is fatal to the
// rendezvous.
func (rv *rendezvous) claim(h *hello, remote string) error {
	world := rv.m.world
	switch {
	case h.World != world:
		return fmt.Errorf("world size mismatch: rank %d says %d, rank 0 says %d", h.From, h.World, world)
	case h.From <= 0 || h.From >= world:
		return fmt.Errorf("rank %d out of range for world size %d", h.From, world)
	}
	rv.claimMu.Lock()
	defer rv.claimMu.Unlock()
	if prev, dup := rv.claimed[h.From]; dup {
		return fmt.Errorf("duplicate rank %d: from %s and from %s", h.From, prev, remote)
	}
	rv.claimed[h.From] = remote
	return nil
}

// collect waits until every rank has registered and returns the table,
// self at rank 0; a fatal check, the deadline or a cancel fails every
// rank that registered.
func (rv *rendezvous) collect(ctx context.Context, self PeerInfo) ([]PeerInfo, error) {
	m := rv.m
	infos := make([]PeerInfo, m.world)
	infos[0] = self
	missing := m.world - 1
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for missing > 0 {
		select {
		case a := <-rv.arrivals:
			r := a.reg.Info.Rank
			rv.conns[r], infos[r] = a.conn, a.reg.Info
			missing--
			m.log.Debug("mesh: rendezvous: rank joined", "joined", r, "from", a.conn.RemoteAddr().String(), "missing", missing)
		case err := <-rv.fatal:
			return nil, rv.failAll(&PeerError{Rank: rankIn(err), Op: "rendezvous", Err: err, Peer: -1, ReportedBy: -1})
		case <-tick.C:
			m.log.Info("mesh: rendezvous: waiting for ranks", "missing", missingRanks(rv.conns))
		case <-ctx.Done():
			miss := missingRanks(rv.conns)
			err := fmt.Errorf("timed out after %v waiting for ranks %v to join at %s (not started, wrong MASTER_ADDR/port, or blocked by a firewall?)", m.cfg.ConnectTimeout, miss, rv.ln.Addr())
			if ctx.Err() == context.Canceled {
				err = fmt.Errorf("cancelled while waiting for ranks %v", miss)
			}
			return nil, rv.failAll(&PeerError{Rank: miss[0], Op: "rendezvous", Err: err, Peer: -1, ReportedBy: -1})
		}
	}
	return infos, nil
}

// failAll tells every registered rank why the rendezvous failed (and the
// ones still registering, through farewell) and closes them.
func (rv *rendezvous) failAll(err error) error {
	rv.failMu.Lock()
	var pe *PeerError
	if errors.As(err, &pe) {
		rv.failMsg = pe.Err.Error()
	} else {
		rv.failMsg = err.Error()
	}
	msg := rv.failMsg
	rv.failMu.Unlock()
	for _, c := range rv.conns {
		if c != nil {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_ = writeFrame(c, msgError, []byte(msg))
			_ = c.Close()
		}
	}
	return err
}

// sendTable sends every rank the table, in parallel, and keeps their
// connections as the control connections.
func (rv *rendezvous) sendTable(infos []PeerInfo) error {
	m := rv.m
	m.table = infos
	tab := tableMsg{World: m.world, Peers: infos}
	var wg sync.WaitGroup
	errs := make([]error, m.world)
	for r := 1; r < m.world; r++ {
		wg.Go(func() {
			_ = rv.conns[r].SetWriteDeadline(time.Now().Add(m.cfg.Timeout))
			errs[r] = writeJSON(rv.conns[r], msgTable, &tab)
			_ = rv.conns[r].SetWriteDeadline(time.Time{})
		})
	}
	wg.Wait()
	m.ctrls = make([]*ctrlConn, m.world)
	m.readyCh = make(chan int, m.world)
	for r := 1; r < m.world; r++ {
		m.ctrls[r] = &ctrlConn{rank: r, conn: rv.conns[r]}
	}
	for r, err := range errs {
		if err != nil {
			return rv.failAll(&PeerError{Rank: r, Op: "rendezvous", Err: errors.New(describe(err, m.cfg.Timeout)), Peer: r, ReportedBy: -1})
		}
	}
	return nil
}

// rankIn extracts "rank N" from a rendezvous check error, for PeerError.
func rankIn(err error) int {
	s := err.Error()
	i := strings.Index(s, "rank ")
	if i < 0 {
		return -1
	}
	n := 0
	j := i + 5
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		n = n*10 + int(s[j]-'0')
		j++
	}
	if j == i+5 {
		return -1
	}
	return n
}

func missingRanks(conns []net.Conn) []int {
	var miss []int
	for r := 1; r < len(conns); r++ {
		if conns[r] == nil {
			miss = append(miss, r)
		}
	}
	return miss
}

// rendezvousClient is every other rank's side: reach rank 0 (retrying
// until ConnectTimeout), authenticate, register, receive the table.
func (m *Mesh) rendezvousClient(ctx context.Context, tcpAddr, unixAddr string) error {
	addr := m.masterAddr()
	rdzvErr := func(err error) error {
		return &PeerError{Rank: 0, Op: "rendezvous", Err: err, Peer: 0, ReportedBy: -1}
	}
	backoff := 20 * time.Millisecond
	var conn net.Conn
	var lastErr error
	lastLog := time.Now()
	for conn == nil {
		d := net.Dialer{Timeout: m.cfg.Timeout}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_, err = clientHandshake(c, m.cfg.key(), hello{Kind: kindRendezvous, Run: m.cfg.Env.RunID, From: m.rank, To: 0, World: m.world}, time.Now().Add(m.cfg.Timeout))
			if err == nil {
				conn = c
				break
			}
			_ = c.Close()
			var re *remoteError
			if errors.Is(err, ErrAuth) || errors.As(err, &re) || strings.Contains(err.Error(), "refused by") || strings.Contains(err.Error(), "expected rank") {
				return rdzvErr(err)
			}
		}
		lastErr = err
		if ctx.Err() != nil {
			if ctx.Err() == context.Canceled {
				return rdzvErr(fmt.Errorf("cancelled while reaching rank 0 at %s", addr))
			}
			return rdzvErr(fmt.Errorf("could not reach rank 0 at %s within %v: %s", addr, m.cfg.ConnectTimeout, describe(lastErr, 0)))
		}
		if time.Since(lastLog) > 10*time.Second {
			m.log.Info("mesh: rendezvous: waiting for rank 0", "addr", addr, "err", err)
			lastLog = time.Now()
		} else {
			m.log.Debug("mesh: rendezvous: retrying", "addr", addr, "err", err, "backoff", backoff)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
	// Our address as rank 0 sees it, for an unspecified bind.
	local := ""
	if ta, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		local = ta.IP.String()
	}
	self := m.selfInfo(advertise(tcpAddr, local), unixAddr)
	_ = conn.SetDeadline(time.Now().Add(m.cfg.Timeout))
	if err := writeJSON(conn, msgRegister, &register{World: m.world, Info: self}); err != nil {
		_ = conn.Close()
		return rdzvErr(errors.New(describe(err, m.cfg.Timeout)))
	}
	// Rank 0 answers when everyone has joined: wait up to ConnectTimeout.
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stopWatch := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	var tab tableMsg
	err := readExpect(conn, msgTable, &tab)
	stopWatch()
	_ = conn.SetDeadline(time.Time{})
	if err != nil {
		_ = conn.Close()
		var re *remoteError
		switch {
		case errors.As(err, &re):
			return rdzvErr(errors.New(re.msg))
		case ctx.Err() == context.Canceled:
			return rdzvErr(errors.New("cancelled while waiting for the other ranks to join"))
		case ctx.Err() != nil:
			return rdzvErr(fmt.Errorf("joined, but the job did not assemble within %v (other ranks missing?)", m.cfg.ConnectTimeout))
		}
		return rdzvErr(fmt.Errorf("waiting for the table: %s", describe(err, m.cfg.Timeout)))
	}
	if tab.World != m.world || len(tab.Peers) != m.world {
		_ = conn.Close()
		return rdzvErr(fmt.Errorf("bad table: world %d with %d entries, want %d", tab.World, len(tab.Peers), m.world))
	}
	for i, p := range tab.Peers {
		if p.Rank != i {
			_ = conn.Close()
			return rdzvErr(fmt.Errorf("bad table: entry %d is rank %d", i, p.Rank))
		}
	}
	m.table = tab.Peers
	m.ctrl = &ctrlConn{rank: 0, conn: conn}
	return nil
}

// link says which transport ranks i and j use: Unix when both have a Unix
// socket and share a host id (network namespace).
func (m *Mesh) link(i, j int) string {
	a, b := m.table[i], m.table[j]
	if a.Unix != "" && b.Unix != "" && a.Host == b.Host {
		return TransportUnix
	}
	return TransportTCP
}

type inboundConn struct {
	from      int
	conn      net.Conn
	transport string
}

// acceptData accepts the data connections of the ranks above this one on
// every data listener, authenticating each. It runs until Open ends.
func (m *Mesh) acceptData() <-chan inboundConn {
	out := make(chan inboundConn, m.world)
	var mu sync.Mutex
	claimed := map[int]bool{}
	for _, ln := range m.dataLns {
		transport := TransportTCP
		if _, ok := ln.(*net.UnixListener); ok {
			transport = TransportUnix
		}
		m.acceptWork.goLoop(func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				m.acceptWork.goConn(conn, func(conn net.Conn) {
					remote := conn.RemoteAddr().String()
					if transport == TransportUnix {
						remote = ln.Addr().String() + " (unix)"
					}
					h, err := serverHandshake(conn, m.cfg.key(), m.rank, m.cfg.Env.RunID, time.Now().Add(m.cfg.Timeout), func(h *hello) error {
						if h.Kind != kindData || h.To != m.rank || h.World != m.world {
							return fmt.Errorf("rank %d expects data connections for rank %d of %d, got %s for rank %d of %d", m.rank, m.rank, m.world, h.Kind, h.To, h.World)
						}
						if h.From <= m.rank || h.From >= m.world {
							return fmt.Errorf("rank %d takes data connections from ranks %d..%d, not %d", m.rank, m.rank+1, m.world-1, h.From)
						}
						mu.Lock()
						defer mu.Unlock()
						if claimed[h.From] {
							return fmt.Errorf("rank %d is already connected", h.From)
						}
						claimed[h.From] = true
						return nil
					})
					if err != nil {
						_ = conn.Close()
						m.log.Warn("mesh: refused data connection", "remote", remote, "err", err)
						if h != nil {
							mu.Lock()
							delete(claimed, h.From)
							mu.Unlock()
						}
						return
					}
					if !m.acceptWork.release(conn) {
						return
					}
					select {
					case out <- inboundConn{h.From, conn, transport}:
					case <-m.openDone:
						_ = conn.Close()
					}
				})
			}
		})
	}
	return out
}

// connectData dials every lower rank and collects the higher ranks'
// connections.
func (m *Mesh) connectData(ctx context.Context, inbound <-chan inboundConn) error {
	type result struct {
		peer int
		conn net.Conn
		tr   string
		err  error
	}
	results := make(chan result, m.world)
	for j := 0; j < m.rank; j++ {
		go func() {
			tr := m.link(m.rank, j)
			conn, err := m.dialData(ctx, j, tr)
			if err != nil && tr == TransportUnix && ctx.Err() == nil {
				m.log.Warn("mesh: Unix socket failed, falling back to TCP", "peer", j, "err", err)
				tr = TransportTCP
				conn, err = m.dialData(ctx, j, tr)
			}
			results <- result{j, conn, tr, err}
		}()
	}
	need := m.world - 1
	for need > 0 {
		select {
		case r := <-results:
			if r.err != nil {
				return m.failOpen(r.peer, "connect", r.err)
			}
			m.addPeer(r.peer, r.conn, r.tr)
			need--
		case in := <-inbound:
			m.addPeer(in.from, in.conn, in.transport)
			need--
		case <-m.aborted:
			return m.verdict().errorFor("connect", -1)
		case <-ctx.Done():
			var miss []int
			m.abortMu.Lock()
			for j, p := range m.peers {
				if p == nil && j != m.rank {
					miss = append(miss, j)
				}
			}
			m.abortMu.Unlock()
			sort.Ints(miss)
			if len(miss) == 0 {
				miss = []int{-1}
			}
			return m.failOpen(miss[0], "connect", fmt.Errorf("data connections to ranks %v not up within %v", miss, m.cfg.ConnectTimeout))
		}
	}
	return nil
}

func (m *Mesh) dialData(ctx context.Context, j int, tr string) (net.Conn, error) {
	network, addr := "tcp", m.table[j].TCP
	if tr == TransportUnix {
		network, addr = "unix", m.table[j].Unix
	}
	backoff := 10 * time.Millisecond
	for {
		d := net.Dialer{Timeout: m.cfg.Timeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			if _, err = clientHandshake(conn, m.cfg.key(), hello{Kind: kindData, Run: m.cfg.Env.RunID, From: m.rank, To: j, World: m.world}, time.Now().Add(m.cfg.Timeout)); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dial %s %s: %s", network, addr, describe(err, m.cfg.Timeout))
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (m *Mesh) addPeer(j int, conn net.Conn, tr string) {
	tune(conn, m.cfg.SocketBuffer)
	m.abortMu.Lock()
	defer m.abortMu.Unlock()
	if m.verdictV != nil {
		_ = conn.Close()
	}
	p := &peer{rank: j, conn: conn, transport: tr}
	m.peers[j] = p
}

// failOpen reports a failure during Open like a data-plane failure, so the
// whole job fails with the same verdict.
func (m *Mesh) failOpen(peer int, op string, err error) error {
	return m.fail(peer, op, err)
}

// syncReady tells rank 0 this rank's mesh is up and waits until every
// rank's is (rank 0 collects READY from all, then sends GO).
func (m *Mesh) syncReady(ctx context.Context) error {
	if m.rank == 0 {
		ready := make([]bool, m.world)
		ready[0] = true
		for need := m.world - 1; need > 0; {
			select {
			case r := <-m.readyCh:
				if !ready[r] {
					ready[r] = true
					need--
				}
			case <-m.aborted:
				return m.verdict().errorFor("connect", -1)
			case <-ctx.Done():
				var miss []int
				for r, ok := range ready {
					if !ok {
						miss = append(miss, r)
					}
				}
				return m.fail(miss[0], "connect", fmt.Errorf("ranks %v did not connect their mesh within %v", miss, m.cfg.ConnectTimeout))
			}
		}
		var wg sync.WaitGroup
		for r := 1; r < m.world; r++ {
			wg.Go(func() { _ = m.ctrls[r].write(msgGo, nil, m.cfg.Timeout) })
		}
		wg.Wait()
		return nil
	}
	if err := m.ctrl.write(msgReady, nil, m.cfg.Timeout); err != nil {
		return m.fail(0, "connect", err)
	}
	select {
	case <-m.goCh:
		return nil
	case <-m.aborted:
		return m.verdict().errorFor("connect", -1)
	case <-ctx.Done():
		return m.fail(0, "connect", fmt.Errorf("rank 0 did not confirm the mesh within %v", m.cfg.ConnectTimeout))
	}
}

// Rank returns this process's rank.
func (m *Mesh) Rank() int { return m.rank }

// World returns the number of ranks.
func (m *Mesh) World() int { return m.world }

// Timeout returns the deadline applied to every send and receive.
func (m *Mesh) Timeout() time.Duration { return m.cfg.Timeout }

// Log returns the mesh's logger (with the rank attached).
func (m *Mesh) Log() *slog.Logger { return m.log }

// Peers returns the table every rank received from rank 0, indexed by
// rank.
func (m *Mesh) Peers() []PeerInfo { return append([]PeerInfo(nil), m.table...) }

// PeerTransport returns "unix" or "tcp" for the link to peer, "" for this
// rank itself or an out-of-range rank.
func (m *Mesh) PeerTransport(peer int) string {
	if peer < 0 || peer >= m.world || peer == m.rank || m.peers[peer] == nil {
		return ""
	}
	return m.peers[peer].transport
}

// Transport summarises every link of the job (all pairs, computed from the
// table, so every rank gives the same answer): "unix", "tcp", "mixed", or
// "none" for a world of 1.
func (m *Mesh) Transport() string {
	if m.world == 1 {
		return "none"
	}
	seen := map[string]bool{}
	for i := range m.world {
		for j := range i {
			if m.peers[j] != nil && i == m.rank {
				seen[m.peers[j].transport] = true
			} else if m.peers[i] != nil && j == m.rank {
				seen[m.peers[i].transport] = true
			} else {
				seen[m.link(i, j)] = true
			}
		}
	}
	if len(seen) > 1 {
		return "mixed"
	}
	for t := range seen {
		return t
	}
	return "none"
}
