package launch

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Flags are the command-line flags of a networked verb. Embed them in the
// verb's kong struct:
//
//	type SyncCmd struct {
//		launch.Flags `embed:""`
//		…
//	}
//
//	func (c *SyncCmd) Run(rio *cli.IO) error {
//		env, err := c.Flags.Resolve(os.Environ())
//		…
//	}
//
// An int flag of -1 and a string flag of "" are unset. The flags carry no
// env tags: TRAINWIRE_* variables are read by Detect (and so by Resolve),
// which programs without kong use too. Build Flags by hand with NewFlags,
// not as a literal: the zero Flags says rank 0 of world 0.
type Flags struct {
	Rank       int    `name:"rank" default:"-1" placeholder:"N" help:"Global rank of this process, 0 <= rank < world (default: TRAINWIRE_RANK, else the launcher's: torchrun, Kubeflow, OpenMPI, PMI/PMIx, Slurm, Kubernetes Indexed Job/JobSet)." envscope:"detect"`
	World      int    `name:"world" default:"-1" placeholder:"N" help:"Number of ranks in the job (default: TRAINWIRE_WORLD, else the launcher's)." envscope:"detect"`
	LocalRank  int    `name:"local-rank" default:"-1" placeholder:"N" help:"Rank among the processes on this node (default: TRAINWIRE_LOCAL_RANK, else the launcher's)." envscope:"detect"`
	LocalWorld int    `name:"local-world" default:"-1" placeholder:"N" help:"Number of processes on this node (default: TRAINWIRE_LOCAL_WORLD, else the launcher's)." envscope:"detect"`
	NodeRank   int    `name:"node-rank" default:"-1" placeholder:"N" help:"Index of this node (default: TRAINWIRE_NODE_RANK, else the launcher's)." envscope:"detect"`
	NumNodes   int    `name:"num-nodes" default:"-1" placeholder:"N" help:"Number of nodes (default: TRAINWIRE_NUM_NODES, else the launcher's)." envscope:"detect"`
	Master     string `name:"master" placeholder:"HOST:PORT" help:"Address of rank 0's rendezvous listener; HOST alone or :PORT alone set one half (default: TRAINWIRE_MASTER_ADDR and TRAINWIRE_MASTER_PORT, else the launcher's MASTER_ADDR with MASTER_PORT+1, else 127.0.0.1 on one node; port 29511)." envscope:"detect"`
	RunID      string `name:"run-id" placeholder:"ID" help:"Name of the job, shared by all its ranks (default: TRAINWIRE_RUN_ID, else the launcher's, e.g. TORCHELASTIC_RUN_ID or SLURM_JOB_ID)." envscope:"detect"`
}

// NewFlags returns Flags with every flag unset, as kong leaves them when
// none is given.
func NewFlags() Flags {
	return Flags{Rank: -1, World: -1, LocalRank: -1, LocalWorld: -1, NodeRank: -1, NumNodes: -1}
}

// Resolve returns this process's identity: each flag that is set overrides
// the value Detect finds in environ, field by field, and Source becomes
// "flags" when any flag is set. When --rank and --world are both set, a
// launcher environment that Detect rejects is ignored (TRAINWIRE_* are
// still read), so explicit flags always work.
func (f Flags) Resolve(environ []string) (Env, error) {
	e := parseEnviron(environ)
	p, err := detectPartial(e)
	if err != nil {
		if f.Rank < 0 || f.World < 0 {
			return Env{}, err
		}
		p = singleBase("flags")
		if err := overlayTrainwire(p, e); err != nil {
			return Env{}, err
		}
	}
	set, err := f.overlay(p)
	if err != nil {
		return Env{}, err
	}
	if set {
		p.source = "flags"
	}
	return p.finish()
}

// overlay replaces what p knows by the flags that are set and reports
// whether any was.
func (f Flags) overlay(p *partial) (bool, error) {
	ints := []struct {
		v    int
		name string
		dst  *ival
	}{
		{f.Rank, "--rank", &p.rank}, {f.World, "--world", &p.world},
		{f.LocalRank, "--local-rank", &p.local}, {f.LocalWorld, "--local-world", &p.lworld},
		{f.NodeRank, "--node-rank", &p.node}, {f.NumNodes, "--num-nodes", &p.nodes},
	}
	set := false
	for _, x := range ints {
		if x.v == -1 {
			continue
		}
		v, err := parseCount(x.name, strconv.Itoa(x.v))
		if err != nil {
			return false, err
		}
		*x.dst, set = v, true
	}
	if f.RunID != "" {
		p.runID, set = f.RunID, true
	}
	if f.Master == "" {
		return set, nil
	}
	return true, overlayMaster(p, f.Master)
}

// overlayMaster sets the master address and port from --master: HOST:PORT,
// [V6]:PORT, HOST, a bare IPv6 address, or :PORT.
func overlayMaster(p *partial, m string) error {
	host, portText := m, ""
	if strings.Contains(m, ":") && net.ParseIP(m) == nil {
		var err error
		if host, portText, err = net.SplitHostPort(m); err != nil {
			return fmt.Errorf("launch: --master=%q is not HOST:PORT: %w", m, ErrInvalid)
		}
	}
	if host == "" && portText == "" {
		return fmt.Errorf("launch: --master=%q names neither a host nor a port: %w", m, ErrInvalid)
	}
	if host != "" {
		p.addr = sval{v: host, ok: true, src: "--master=" + m}
	}
	if portText == "" {
		return nil
	}
	port, err := parsePort("--master", portText)
	if err != nil {
		return fmt.Errorf("launch: --master=%q: port %q is not in 1..65535: %w", m, portText, ErrInvalid)
	}
	p.port, p.portPlusOne = port, false
	return nil
}
