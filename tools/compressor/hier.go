package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/tools/compressor/internal/csync"
)

// setupHier makes rn run in two levels (--hierarchical): the ranks agree
// on the launcher's nodes, node 0's leader listens for the leaders' mesh
// on its bind address and shares the address, the leaders open that mesh
// and a Syncer on it (with the world Syncer's error-feedback store: the
// node's state lives on its leader). Without --hierarchical it does
// nothing. It returns what closes the leaders' mesh.
func (f *SyncFlags) setupHier(ctx context.Context, env launch.Env, cfg mesh.Config, rn *csync.Runner, hello []string) (func(), error) {
	if !f.Hierarchical {
		return func() {}, nil
	}
	xm, err := openHier(ctx, env, cfg, rn, hello)
	if err != nil {
		return func() {}, err
	}
	return func() {
		if xm != nil {
			_ = xm.Close()
		}
	}, nil
}

func openHier(ctx context.Context, env launch.Env, cfg mesh.Config, rn *csync.Runner, hello []string) (*mesh.Mesh, error) {
	if env.NodeRank < 0 || env.NumNodes <= 0 || env.LocalWorld <= 0 {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--hierarchical needs the launcher's node rank, node count and local rank (TRAINWIRE_NODE_RANK, TRAINWIRE_NUM_NODES, TRAINWIRE_LOCAL_RANK, TRAINWIRE_LOCAL_WORLD, or torchrun's, Slurm's, …); got node %d of %d, local world %d", env.NodeRank, env.NumNodes, env.LocalWorld))
	}
	s := rn.S
	nodes, err := csync.Topology(ctx, s, env.NodeRank, env.LocalRank)
	if err != nil {
		return nil, err
	}
	root := nodes[0][0]
	var ln net.Listener
	addr := ""
	if s.Rank() == root {
		host := cfg.Bind
		if host == "" {
			host = mesh.DefaultBind
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			s.Mesh().Abort(fmt.Errorf("rank %d: inter-node listener: %w", s.Rank(), err))
			return nil, fmt.Errorf("--hierarchical: the leaders' listener: %w", err)
		}
		addr = ln.Addr().String()
	}
	if addr, err = s.Share(ctx, root, addr); err != nil {
		return nil, err
	}
	var inter *csync.Syncer
	var xm *mesh.Mesh
	if env.LocalRank == 0 {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("--hierarchical: leaders' address %q: %w", addr, err)
		}
		xc := cfg
		xc.Env = env
		xc.Env.Rank, xc.Env.World, xc.Env.MasterAddr = env.NodeRank, len(nodes), host
		xc.Env.MasterPort, _ = strconv.Atoi(port)
		xc.Env.RunID = env.RunID + "/inter"
		xc.Listener = ln
		if xm, err = mesh.Open(ctx, xc); err != nil {
			s.Mesh().Abort(fmt.Errorf("rank %d (leader of node %d): inter-node mesh: %w", s.Rank(), env.NodeRank, err))
			return nil, fmt.Errorf("--hierarchical: the leaders' mesh: %w", err)
		}
		if inter, err = csync.New(ctx, xm, hello); err != nil {
			xm.Close()
			return nil, err
		}
		inter.MaxBytes, inter.Store = s.MaxBytes, s.Store
	}
	if rn.H, err = csync.NewHier(s, inter, nodes); err != nil {
		return nil, err
	}
	return xm, nil
}
