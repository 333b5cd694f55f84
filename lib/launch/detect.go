package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors that Detect and Resolve wrap; test for them with errors.Is. Every
// message also names the variable (or flag) and the value at fault.
var (
	// ErrInvalid: a value is not a non-negative integer, is out of range,
	// or is a malformed list.
	ErrInvalid = errors.New("invalid value")
	// ErrInconsistent: values contradict each other (rank >= world, local
	// rank >= local world, …).
	ErrInconsistent = errors.New("inconsistent values")
	// ErrIncomplete: a launcher's variables are present but do not say
	// enough to place this process (a missing variable, a world size that
	// the launcher does not export, …).
	ErrIncomplete = errors.New("incomplete launcher environment")
	// ErrNoMaster: the ranks span several nodes and nothing names the host
	// of rank 0.
	ErrNoMaster = errors.New("master address unknown")
)

// Detect works out this process's identity from an environment in the
// format of os.Environ ("KEY=value"; the first of duplicate keys wins, as
// with os.Getenv; a variable set to "" counts as unset). See the package
// documentation for the order of sources and the variables each reads.
func Detect(environ []string) (Env, error) {
	p, err := detectPartial(parseEnviron(environ))
	if err != nil {
		return Env{}, err
	}
	return p.finish()
}

// envMap is a parsed environment.
type envMap map[string]string

func parseEnviron(environ []string) envMap {
	m := make(envMap, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

// get returns the value of a variable that is set and not empty.
func (e envMap) get(name string) (string, bool) {
	v, ok := e[name]
	return v, ok && v != ""
}

func (e envMap) has(name string) bool {
	_, ok := e.get(name)
	return ok
}

func (e envMap) hasAll(names ...string) bool {
	for _, n := range names {
		if !e.has(n) {
			return false
		}
	}
	return true
}

// firstSet returns the first of names that is set, or "".
func (e envMap) firstSet(names ...string) string {
	for _, n := range names {
		if e.has(n) {
			return n
		}
	}
	return ""
}

// require returns an ErrIncomplete error naming the first of names that is
// unset, saying which launcher wanted it, or nil.
func (e envMap) require(launcher string, names ...string) error {
	for _, n := range names {
		if !e.has(n) {
			return fmt.Errorf("launch: %s: %s is not set: %w", launcher, n, ErrIncomplete)
		}
	}
	return nil
}

// ival is an integer that may be unknown, with a description of where it
// came from ("RANK=3", "--rank=3") for error messages.
type ival struct {
	v   int
	ok  bool
	src string
}

func known(v int, src string) ival { return ival{v: v, ok: true, src: src} }

// sval is a string that may be unknown, with its origin.
type sval struct {
	v   string
	ok  bool
	src string
}

// parseCount parses a non-negative integer below MaxWorld (a rank, a size,
// an index) found in the variable or flag name.
func parseCount(name, raw string) (ival, error) {
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil:
		return ival{}, fmt.Errorf("launch: %s=%q is not an integer: %w", name, raw, ErrInvalid)
	case n < 0:
		return ival{}, fmt.Errorf("launch: %s=%d is negative: %w", name, n, ErrInvalid)
	case n > MaxWorld:
		return ival{}, fmt.Errorf("launch: %s=%d is larger than %d: %w", name, n, MaxWorld, ErrInvalid)
	}
	return known(n, name+"="+raw), nil
}

// parsePort parses a TCP port 1..65535.
func parsePort(name, raw string) (ival, error) {
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 65535 {
		return ival{}, fmt.Errorf("launch: %s=%q is not a port number (1..65535): %w", name, raw, ErrInvalid)
	}
	return known(n, name+"="+raw), nil
}

// readInt sets *dst from the first of names that is set; it leaves *dst
// alone when none is.
func (e envMap) readInt(dst *ival, names ...string) error {
	name := e.firstSet(names...)
	if name == "" {
		return nil
	}
	v, err := parseCount(name, e[name])
	if err == nil {
		*dst = v
	}
	return err
}

// readInts calls readInt for pairs of (destination, variable name).
func (e envMap) readInts(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := e.readInt(pairs[i].(*ival), pairs[i+1].(string)); err != nil {
			return err
		}
	}
	return nil
}

// partial is what a source knows; finish fills the rest and checks it.
type partial struct {
	source string
	rank   ival
	world  ival
	local  ival // local rank
	lworld ival // local world
	node   ival // node rank
	nodes  ival // number of nodes
	addr   sval
	port   ival
	// portPlusOne: port is a launcher's MASTER_PORT, which belongs to the
	// launcher's own store; ours is the next one.
	portPlusOne bool
	runID       string
	// nodelist is a Slurm hostlist whose first host is the master when
	// nothing else names it; nodelistVar is the variable it came from.
	nodelist, nodelistVar string
	// perPod: one process per pod (Kubernetes): local rank 0 of 1, and the
	// pod is the node.
	perPod bool
	// Advice appended to errors about an unknown world, local rank or master.
	worldHint, localHint, masterHint string
}

// singleBase is a process alone unless something overrides it.
func singleBase(source string) *partial {
	return &partial{
		source: source,
		rank:   known(0, "rank 0 (no launcher found)"),
		world:  known(1, "world 1 (no launcher found)"),
		nodes:  known(1, "1 node (no launcher found)"),
	}
}

// detectPartial returns what TRAINWIRE_* variables and the launcher say.
func detectPartial(e envMap) (*partial, error) {
	var p *partial
	if e.hasAll("TRAINWIRE_RANK", "TRAINWIRE_WORLD") {
		p = singleBase("trainwire")
	} else {
		var err error
		if p, err = detectLauncher(e); err != nil {
			return nil, err
		}
	}
	return p, overlayTrainwire(p, e)
}

// overlayTrainwire replaces what p knows by the TRAINWIRE_* variables set.
func overlayTrainwire(p *partial, e envMap) error {
	err := e.readInts(
		&p.rank, "TRAINWIRE_RANK", &p.world, "TRAINWIRE_WORLD",
		&p.local, "TRAINWIRE_LOCAL_RANK", &p.lworld, "TRAINWIRE_LOCAL_WORLD",
		&p.node, "TRAINWIRE_NODE_RANK", &p.nodes, "TRAINWIRE_NUM_NODES")
	if err != nil {
		return err
	}
	if v, ok := e.get("TRAINWIRE_MASTER_ADDR"); ok {
		p.addr = sval{v: v, ok: true, src: "TRAINWIRE_MASTER_ADDR=" + v}
	}
	if v, ok := e.get("TRAINWIRE_MASTER_PORT"); ok {
		if p.port, err = parsePort("TRAINWIRE_MASTER_PORT", v); err != nil {
			return err
		}
		p.portPlusOne = false
	}
	if v, ok := e.get("TRAINWIRE_RUN_ID"); ok {
		p.runID = v
	}
	if e.has("TRAINWIRE_RANK") {
		p.source = "trainwire"
	}
	return nil
}

// finish derives what p leaves unknown, checks the result and returns it.
func (p *partial) finish() (Env, error) {
	if !p.world.ok {
		return Env{}, fmt.Errorf("launch: %s: the world size is unknown%s: %w", p.source, p.worldHint, ErrIncomplete)
	}
	if !p.rank.ok {
		return Env{}, fmt.Errorf("launch: %s: the rank is unknown: set TRAINWIRE_RANK or --rank: %w", p.source, ErrIncomplete)
	}
	if err := p.fillLocal(); err != nil {
		return Env{}, err
	}
	p.fillNodes()
	if err := p.check(); err != nil {
		return Env{}, err
	}
	addr, err := p.masterAddr()
	if err != nil {
		return Env{}, err
	}
	port, err := p.masterPort()
	if err != nil {
		return Env{}, err
	}
	return Env{
		Rank: p.rank.v, World: p.world.v,
		LocalRank: p.local.v, LocalWorld: p.lworld.v,
		NodeRank: p.node.v, NumNodes: p.nodes.v,
		MasterAddr: addr, MasterPort: port,
		RunID: p.runID, Source: p.source,
	}, nil
}

// fillLocal derives the local rank and local world where they are unknown.
func (p *partial) fillLocal() error {
	if p.perPod {
		setIfUnknown(&p.local, known(0, "local rank 0 (one process per pod)"))
		setIfUnknown(&p.lworld, known(1, "local world 1 (one process per pod)"))
		setIfUnknown(&p.node, known(p.rank.v, fmt.Sprintf("node rank %d (the pod's rank)", p.rank.v)))
		setIfUnknown(&p.nodes, known(p.world.v, fmt.Sprintf("%d nodes (one pod per rank)", p.world.v)))
	}
	if p.local.ok && p.lworld.ok {
		return nil
	}
	if (p.nodes.ok && p.nodes.v == 1) || p.world.v == 1 {
		setIfUnknown(&p.local, known(p.rank.v, fmt.Sprintf("local rank %d (one node)", p.rank.v)))
		setIfUnknown(&p.lworld, known(p.world.v, fmt.Sprintf("local world %d (one node)", p.world.v)))
		return nil
	}
	missing := "local rank"
	if p.local.ok {
		missing = "local world size"
	}
	hint := p.localHint
	if hint == "" {
		hint = ": set TRAINWIRE_LOCAL_RANK and TRAINWIRE_LOCAL_WORLD (or --local-rank and --local-world)"
	}
	return fmt.Errorf("launch: %s: the %s is unknown and the job may span several nodes (world %d)%s: %w",
		p.source, missing, p.world.v, hint, ErrIncomplete)
}

func setIfUnknown(dst *ival, v ival) {
	if !dst.ok {
		*dst = v
	}
}

// fillNodes derives the node rank and count where they are unknown; -1
// when they cannot be derived.
func (p *partial) fillNodes() {
	if !p.nodes.ok {
		p.nodes = known(-1, "unknown number of nodes")
		if p.lworld.v == p.world.v {
			p.nodes = known(1, fmt.Sprintf("1 node (local world %d = world)", p.lworld.v))
		}
	}
	if !p.node.ok {
		p.node = known(-1, "unknown node rank")
		if p.nodes.v == 1 {
			p.node = known(0, "node rank 0 (one node)")
		}
	}
}

// check enforces the invariants of Env, naming the values at fault.
func (p *partial) check() error {
	checks := []struct {
		bad       bool
		a, rel, b string
	}{
		{p.world.v < 1, p.world.src, "must be at least", "1"},
		{p.rank.v >= p.world.v, p.rank.src, "must be less than", p.world.src},
		{p.lworld.v < 1, p.lworld.src, "must be at least", "1"},
		{p.local.v >= p.lworld.v, p.local.src, "must be less than", p.lworld.src},
		{p.lworld.v > p.world.v, p.lworld.src, "must not exceed", p.world.src},
		{p.nodes.v == 0, p.nodes.src, "must be at least", "1"},
		{p.nodes.v > p.world.v, p.nodes.src, "must not exceed", p.world.src},
		{p.nodes.v > 0 && p.node.v >= p.nodes.v, p.node.src, "must be less than", p.nodes.src},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("launch: %s: %s %s %s: %w", p.source, c.a, c.rel, c.b, ErrInconsistent)
		}
	}
	return nil
}

// masterAddr returns the host of rank 0's rendezvous listener.
func (p *partial) masterAddr() (string, error) {
	switch {
	case p.addr.ok:
		return p.addr.v, nil
	case p.lworld.v == p.world.v:
		return "127.0.0.1", nil
	case p.nodelist != "":
		h, err := firstHost(p.nodelist)
		if err != nil {
			return "", fmt.Errorf("launch: %s: %w: %w", p.nodelistVar, err, ErrInvalid)
		}
		return h, nil
	}
	return "", fmt.Errorf("launch: %s: the ranks span several nodes (local world %d of world %d) and nothing names the host of rank 0: "+
		"set TRAINWIRE_MASTER_ADDR or --master%s: %w", p.source, p.lworld.v, p.world.v, p.masterHint, ErrNoMaster)
}

// masterPort returns the port of rank 0's rendezvous listener.
func (p *partial) masterPort() (int, error) {
	if !p.port.ok {
		return DefaultPort, nil
	}
	if !p.portPlusOne {
		return p.port.v, nil
	}
	if p.port.v >= 65535 {
		return 0, fmt.Errorf("launch: %s: our port is the launcher's port + 1, past 65535: set TRAINWIRE_MASTER_PORT: %w",
			p.port.src, ErrInvalid)
	}
	return p.port.v + 1, nil
}
