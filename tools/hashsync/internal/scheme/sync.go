package scheme

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"

	"trainwire.dev/lib/zen"
)

// Schemes lists every scheme by name.
var Schemes = []string{"zen", "bp-coo", "agsparse", "sparcml", "sparse-ps", "omnireduce", "hitopk", "dense", "auto"}

// Config chooses the scheme and its parameters. Every rank must pass the
// same Config (the handshake checks it).
type Config struct {
	Scheme string
	// Seed is the base of the hash seeds (h0 and h1..hk derive from it).
	Seed uint32
	// K is the number of second-level hash functions (paper: 3).
	K int
	// C and R2 size the hash memory (paper: 2 and 0.1).
	C, R2 float64
	// Partitioner is "hash" (Algorithm 1) or "bucket" (counting sort).
	Partitioner string
	// Pull is zen's pull encoding: "auto" (smaller of hash bitmap and COO,
	// per message), "bitmap" or "coo".
	Pull string
	// Block is OmniReduce's block size in elements (256).
	Block int
	// Rho is HiTopKComm's density (0: keep every non-zero row, lossless);
	// LocalSize is its ranks per node.
	Rho       float64
	LocalSize int
	// ProfileIters is how many iterations auto profiles (with zen, timed)
	// before applying Zen's rule.
	ProfileIters int
	// Trials is how many iterations auto then times the other candidate,
	// sparcml, where the world size allows it (a power of two), before
	// keeping the faster of the two (the slowest rank's median time of
	// each); 0 keeps the rule's choice.
	Trials int
	// Average divides the sum by the world size.
	Average bool
	// Workers is the hashing goroutines (0: GOMAXPROCS).
	Workers int
	// MaxMessage bounds every message received, in bytes.
	MaxMessage int64
	// MaxNameLen bounds tensor names from peers.
	MaxNameLen int
}

// DefaultConfig returns the paper's defaults for scheme.
func DefaultConfig(scheme string) Config {
	return Config{Scheme: scheme, Seed: 0, K: 3, C: 2, R2: 0.1, Partitioner: "hash", Pull: "auto", Block: 256, LocalSize: 1, ProfileIters: 3, Trials: 2, MaxMessage: 1 << 34, MaxNameLen: 4096}
}

// Check validates the configuration for a world of n ranks.
func (c Config) Check(n int) error {
	if !slices.Contains(Schemes, c.Scheme) {
		return fmt.Errorf("unknown scheme %q (want one of %s)", c.Scheme, strings.Join(Schemes, ", "))
	}
	switch {
	case c.K < 1 || c.K > 16:
		return fmt.Errorf("--k %d: want 1..16 second-level hash functions", c.K)
	case !(c.C > 0) || !(c.R2 > 0):
		return fmt.Errorf("--r1-factor and --r2-fraction must be positive")
	case c.Partitioner != "hash" && c.Partitioner != "bucket":
		return fmt.Errorf("--partitioner %q: want hash or bucket", c.Partitioner)
	case c.Pull != "auto" && c.Pull != "bitmap" && c.Pull != "coo":
		return fmt.Errorf("--pull %q: want auto, bitmap or coo", c.Pull)
	case c.Block < 1:
		return fmt.Errorf("--block %d: want at least 1", c.Block)
	case c.Rho < 0 || c.Rho > 1:
		return fmt.Errorf("--rho %g: want 0 (lossless) or a density in (0, 1]", c.Rho)
	case c.ProfileIters < 1:
		return fmt.Errorf("--profile-iters %d: want at least 1", c.ProfileIters)
	case c.Trials < 0:
		return fmt.Errorf("--auto-trials %d: want 0 or more", c.Trials)
	}
	if c.Scheme == "hitopk" && (c.LocalSize < 1 || n%c.LocalSize != 0) {
		return fmt.Errorf("--local-size %d does not divide the world of %d ranks", c.LocalSize, n)
	}
	if (c.Scheme == "sparcml") && n&(n-1) != 0 {
		return fmt.Errorf("sparcml's recursive doubling needs a power-of-two world, not %d", n)
	}
	return nil
}

// Hasher partitions a tensor's row indices by h0 through Algorithm 1,
// zen's push partition. The default is lib/zen's hasher on the CPU;
// `hashsync sync --device gpu` passes one on the GPU (UseHasher). Every
// Hasher must put the same set of positions in each part (Algorithm 1's
// sets do not depend on who wins a compare-and-swap); the order within a
// part is free: the servers sum each row in rank order whatever order
// the rows come in.
type Hasher interface {
	Hash(idx []uint32, cfg zen.HashConfig) (*zen.Parts, error)
}

// UseHasher makes zen's push partition (with Partitioner "hash") run on
// h. Ranks may differ in this: the results do not.
func (s *Syncer) UseHasher(h Hasher) { s.hasher = h }

// Syncer synchronizes tensors over a mesh, one after the other; all ranks
// must pass tensors of the same names and shapes in the same order.
type Syncer struct {
	m    *mesh.Mesh
	comm *collective.Comm
	cfg  Config
	n, r int
	seq  uint32

	seeds zen.Seeds
	meta  *mesh.Phase
	ph    map[string]*mesh.Phase

	// prepMu serializes Prepare: its hasher, bucketer and scratch are
	// shared, and Sync prepares again (when auto changed its mind) while
	// the caller may be preparing the next tensor on another goroutine.
	prepMu   sync.Mutex
	hasher   Hasher
	bucketer zen.Bucketer
	owner    []int16              // Prepare's scratch: each row's part (gatherOnce)
	residual map[string][]float32 // hitopk error feedback, per tensor
	union    []uint64             // syncPS rows pushed to this server, by position, reused
	unionPre []int32              // syncPS prefix popcounts of union, reused
	pullBody []byte               // syncPS pull message, reused
	mineIdx  []uint32             // syncPS own rows, reused
	runIdx   [][]uint32           // syncPS decoded pull rows per rank, reused
	posBuf   [][]int32            // syncPS pushed positions per rank, reused
	dupBits  [][]uint64           // syncPS positions pushed per rank, reused
	order    [][]int32            // syncPS pushed entries by chunk per rank, reused
	rbufs    map[int][][]byte     // receive buffers per operation and rank, reused
	bodies   bodies               // push messages' buffers, recycled
	results  tensor.Pool          // syncPS results' values, back from Release
	autoMu   sync.Mutex           // auto is read by Prepare, written by Sync
	auto     map[string]*autoState
	// slow, in tests, delays a scheme's syncs inside the time auto
	// measures.
	slow func(scheme string) time.Duration
}

// New returns a Syncer on m after the handshake: every rank checks that
// every other rank runs the same configuration (scheme, seeds, hash
// parameters, world), and fails naming the rank and the field otherwise.
func New(ctx context.Context, m *mesh.Mesh, cfg Config) (*Syncer, error) {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = 1 << 34
	}
	if cfg.MaxNameLen <= 0 {
		cfg.MaxNameLen = 4096
	}
	if err := cfg.Check(m.World()); err != nil {
		return nil, err
	}
	s := &Syncer{m: m, comm: collective.New(m, collective.Options{}), cfg: cfg, n: m.World(), r: m.Rank(),
		seeds: zen.DefaultSeeds(cfg.Seed, cfg.K), meta: m.Phase("meta"), ph: map[string]*mesh.Phase{},
		residual: map[string][]float32{}, auto: map[string]*autoState{},
		runIdx: make([][]uint32, m.World()), posBuf: make([][]int32, m.World()),
		dupBits: make([][]uint64, m.World()), order: make([][]int32, m.World()),
		hasher: &zen.Hasher{}}
	if err := s.handshake(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Syncer) phase(name string) *mesh.Phase {
	p, ok := s.ph[name]
	if !ok {
		p = s.m.Phase(name)
		s.ph[name] = p
	}
	return p
}

// hello is the configuration every rank must share, as text fields.
func (s *Syncer) hello() []string {
	c := s.cfg
	return []string{
		"version=1",
		"world=" + fmt.Sprint(s.n),
		"scheme=" + c.Scheme,
		"seed=" + fmt.Sprint(c.Seed),
		"k=" + fmt.Sprint(c.K),
		"r1-factor=" + fmt.Sprint(c.C),
		"r2-fraction=" + fmt.Sprint(c.R2),
		"pull=" + c.Pull,
		"block=" + fmt.Sprint(c.Block),
		"rho=" + fmt.Sprint(c.Rho),
		"local-size=" + fmt.Sprint(c.LocalSize),
		"profile-iters=" + fmt.Sprint(c.ProfileIters),
		"auto-trials=" + fmt.Sprint(c.Trials),
		"average=" + fmt.Sprint(c.Average),
	}
}

// MismatchError is a disagreement between ranks about the configuration
// or a tensor: every rank reports it, naming the other rank.
type MismatchError struct{ Msg string }

func (e *MismatchError) Error() string { return e.Msg }

// ExitCode is 2 (bad input: the ranks were given inconsistent input or flags).
func (e *MismatchError) ExitCode() int { return exit.BadInput }

func (s *Syncer) handshake() error {
	mine := strings.Join(s.hello(), "\n")
	body := []byte(mine)
	all := others(s.n, s.r)
	got, err := s.exchange(s.meta, opHello, all, func(int) message { return message{fmt: fmtHello, n: uint64(len(body)), body: body} },
		all, func(p int, f uint32, n uint64) (int, error) {
			if f != fmtHello || n > 1<<16 {
				return 0, fmt.Errorf("handshake: format %d, %d bytes: not a hashsync sync peer", f, n)
			}
			return int(n), nil
		})
	if err != nil {
		return err
	}
	my := s.hello()
	for _, p := range all {
		theirs := strings.Split(string(got[p].body), "\n")
		for i, f := range my {
			t := "(missing)"
			if i < len(theirs) {
				t = theirs[i]
			}
			if t != f {
				key, _, _ := strings.Cut(f, "=")
				_, tv, _ := strings.Cut(t, "=")
				_, mv, _ := strings.Cut(f, "=")
				return &MismatchError{fmt.Sprintf("handshake: rank %d has %s %s, this rank (%d) has %s: every rank must run sync with the same flags", p, key, tv, s.r, mv)}
			}
		}
	}
	return nil
}

// Stats describe one synchronization.
type Stats struct {
	Scheme string
	// Bytes per phase: payload sent and received by this rank, in all
	// and per peer (indexed by rank).
	Sent, Recv         map[string]int64
	SentPeer, RecvPeer map[string][]int64
	// Times per step, seconds.
	Times map[string]float64
	// Balance (zen, bp-coo, sparse-ps, omnireduce): push imbalance of this
	// worker (max_j n|I_i^j|/|I_i|), pull imbalance (n max_j|𝕀'_j|/|I|).
	PushImbalance, PullImbalance float64
	// Hashing (zen): serial-memory writes and overflows.
	Serial, Overflow   int
	LocalRows, OutRows int
	// Choice is what auto chose (or "profile", or "trial" while it times
	// the other candidate).
	Choice string
	// Rule is the choice of Zen's rule once auto has profiled; ZenS and
	// TrialS are the slowest rank's median sync times (seconds) of zen
	// and of the candidate timed after it, once auto has decided on them.
	Rule         string
	ZenS, TrialS float64
	// Measured while auto profiles: density d_G, densification γ^n, and
	// the two sides of Zen's rule (BP wins when LHS > RHS).
	Density, Gamma, LHS, RHS float64

	profile *profile
}

// Prepared is a tensor ready to synchronize: the local work (hashing,
// partitioning, encoding) done, so that it can overlap the communication
// of the previous tensor.
type Prepared struct {
	T      *Tensor
	scheme string
	push   []message // per destination rank (BP-like schemes)
	local  message   // this rank's own part
	stats  Stats
	prepNS float64
	err    error
	// DenseOut, when set by the caller before Sync, is a zeroed
	// rows·width buffer that receives the result (see Tensor.DenseVal).
	DenseOut []float32
}

// Prepare does the local part of synchronizing t (for zen: Algorithm 1 and
// the COO encoding of the n push messages). It does not touch the network,
// so it may run on another goroutine while Sync communicates; concurrent
// calls (the caller's, and Sync's own when auto switched schemes after t
// was prepared) take turns.
func (s *Syncer) Prepare(t *Tensor) *Prepared {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	t0 := time.Now()
	p := &Prepared{T: t, scheme: s.schemeFor(t.Name)}
	p.stats.Times = map[string]float64{}
	if err := t.Check(); err != nil {
		p.err = err
		return p
	}
	if t.Rows > zen.MaxRows-1 {
		p.err = fmt.Errorf("tensor %q: %d rows: hashsync indexes rows with 32 bits", t.Name, t.Rows)
		return p
	}
	switch p.scheme {
	case "zen", "bp-coo", "profile":
		p.err = s.preparePS(p, true)
	case "sparse-ps":
		p.err = s.preparePS(p, false)
	case "omnireduce":
		p.err = s.prepareOmni(p)
	}
	p.stats.Times["prepare"] = time.Since(t0).Seconds()
	return p
}

// Release hands back a result of Sync the caller is done with (written
// out, copied): its buffers serve later results without the zeroing and
// page faults of fresh memory. The caller must not use t's values
// afterwards. Results whose values Sync did not draw from its pool (other
// schemes, a dense output) are left alone; not calling Release is fine.
func (s *Syncer) Release(t *Tensor) {
	if t != nil && cap(t.Val) > 0 {
		s.results.Put(t.Val[:cap(t.Val)])
	}
}

// Sync synchronizes a prepared tensor and returns the sum over all ranks
// (rows with a non-zero element, ascending).
func (s *Syncer) Sync(ctx context.Context, p *Prepared) (*Tensor, *Stats, error) {
	t := p.T
	s.seq++
	if err := s.describe(t); err != nil {
		return nil, nil, err
	}
	if p.err != nil {
		return nil, nil, p.err
	}
	if err := ctx.Err(); err != nil {
		s.m.Abort(fmt.Errorf("sync: %w", context.Cause(ctx)))
		return nil, nil, err
	}
	// auto may have decided since Prepare ran (the previous iteration's
	// profile): a tensor prepared for profiling is ready for zen; anything
	// else is prepared again.
	if sch := s.schemeFor(t.Name); sch != p.scheme && !(sch == "zen" && p.scheme == "profile") {
		stats, dense := p.stats, p.DenseOut
		*p = *s.Prepare(t)
		p.DenseOut = dense
		p.stats.Times["prepare"] += stats.Times["prepare"]
		if p.err != nil {
			return nil, nil, p.err
		}
	} else if sch != p.scheme {
		p.scheme = sch
	}
	before := s.m.Counters()
	t0 := time.Now()
	st := &p.stats
	st.Scheme = p.scheme
	st.LocalRows = t.Nnz()
	var out *Tensor
	var err error
	switch p.scheme {
	case "zen", "bp-coo", "sparse-ps", "profile":
		out, err = s.syncPS(p)
	case "omnireduce":
		out, err = s.syncOmni(p)
	case "agsparse":
		out, err = s.syncAG(ctx, t, st)
	case "sparcml":
		out, err = s.syncHC(t, st)
	case "hitopk":
		out, err = s.syncHiTopK(t, st)
	case "dense":
		out, err = s.syncDense(ctx, t, st)
	default:
		err = fmt.Errorf("internal: scheme %q", p.scheme)
	}
	if err != nil {
		return nil, nil, err
	}
	if s.slow != nil {
		time.Sleep(s.slow(p.scheme))
	}
	if err := s.autoDone(t, st, p.scheme, time.Since(t0).Seconds()); err != nil {
		return nil, nil, err
	}
	if out.DenseVal == nil {
		out.Compact()
		if s.cfg.Average {
			out.Scale(1 / float32(s.n))
		}
		if d := p.DenseOut; d != nil {
			out.ScatterInto(d)
			out.DenseVal, out.Val = d, nil
		}
	} else if s.cfg.Average {
		a := 1 / float32(s.n)
		w := out.Width
		for _, i := range out.Idx {
			for c := range w {
				out.DenseVal[int(i)*w+c] *= a
			}
		}
	}
	st.OutRows = out.Nnz()
	after := s.m.Counters()
	st.Sent, st.Recv = map[string]int64{}, map[string]int64{}
	st.SentPeer, st.RecvPeer = map[string][]int64{}, map[string][]int64{}
	for ph, pt := range after {
		var sent, recv int64
		sp, rp := make([]int64, len(pt)), make([]int64, len(pt))
		for p, tr := range pt {
			sp[p], rp[p] = tr.BytesSent, tr.BytesRecv
			if b, ok := before[ph]; ok && p < len(b) {
				sp[p] -= b[p].BytesSent
				rp[p] -= b[p].BytesRecv
			}
			sent += sp[p]
			recv += rp[p]
		}
		if sent != 0 || recv != 0 {
			st.Sent[ph], st.Recv[ph] = sent, recv
			st.SentPeer[ph], st.RecvPeer[ph] = sp, rp
		}
	}
	return out, st, nil
}

// describe checks that every rank is at the same tensor: same name, rows
// and width. A rank at the end of its input sends an end marker instead
// (t == nil), so a rank with more tensors than the others fails too.
func (s *Syncer) describe(t *Tensor) error {
	var body []byte
	var f uint32 = fmtEnd
	var rows, width uint64
	if t != nil {
		f = fmtName
		rows, width = uint64(t.Rows), uint64(t.Width)
		body = binary.LittleEndian.AppendUint64(body, rows)
		body = binary.LittleEndian.AppendUint64(body, width)
		body = append(body, t.Name...)
	}
	all := others(s.n, s.r)
	got, err := s.exchange(s.meta, opDesc, all, func(int) message { return message{fmt: f, n: uint64(len(body)), body: body} },
		all, func(p int, f uint32, n uint64) (int, error) {
			if (f != fmtName && f != fmtEnd) || n > uint64(16+s.cfg.MaxNameLen) || (f == fmtName && n < 16) {
				return 0, fmt.Errorf("tensor descriptor: format %d, %d bytes", f, n)
			}
			return int(n), nil
		})
	if err != nil {
		return err
	}
	desc := func(m message) string {
		if m.fmt == fmtEnd {
			return "no more tensors (end of its input)"
		}
		r, w := binary.LittleEndian.Uint64(m.body), binary.LittleEndian.Uint64(m.body[8:])
		return fmt.Sprintf("tensor %q with %d rows of width %d", string(m.body[16:]), r, w)
	}
	mine := desc(message{fmt: f, body: body})
	for _, p := range all {
		if theirs := desc(got[p]); theirs != mine {
			return &MismatchError{fmt.Sprintf("tensor #%d: rank %d has %s, this rank (%d) has %s", s.seq, p, theirs, s.r, mine)}
		}
	}
	return nil
}

// Finish tells the other ranks this rank's input has ended, and checks
// that theirs has too.
func (s *Syncer) Finish() error {
	s.seq++
	return s.describe(nil)
}

// Barrier returns once every rank has called it.
func (s *Syncer) Barrier(ctx context.Context) error { return s.comm.Barrier(ctx) }

// Seeds returns the hash seeds in use.
func (s *Syncer) Seeds() zen.Seeds { return s.seeds }

func (s *Syncer) schemeFor(name string) string {
	if s.cfg.Scheme != "auto" {
		return s.cfg.Scheme
	}
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	a := s.auto[name]
	switch {
	case a == nil:
		return "profile"
	case a.choice != "":
		return a.choice
	case a.trial != "":
		return a.trial
	}
	return "profile"
}

// imbalance returns n·max(c)/Σc (1 when all are equal; 0 when empty).
func imbalance(c []int) float64 {
	tot, mx := 0, 0
	for _, v := range c {
		tot += v
		mx = max(mx, v)
	}
	if tot == 0 {
		return 0
	}
	return float64(len(c)) * float64(mx) / float64(tot)
}

// addRow adds src to dst element-wise (dst += src).
func addRow(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
