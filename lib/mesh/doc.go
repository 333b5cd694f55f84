// Package mesh connects the ranks of a job: a rendezvous through rank 0,
// then a full mesh of authenticated connections (Unix sockets between
// ranks that share a network namespace, TCP otherwise), with deadlines on
// every step, job-wide failure propagation and byte counters. Package
// collective runs the collectives on it.
//
// # Rendezvous
//
// Rank 0 listens at MasterAddr:MasterPort (TCP). Every rank first opens its
// data listeners: TCP on Config.Bind, port chosen by the kernel, and on
// Linux an abstract Unix socket "@trainwire-<runid>-<random>". Ranks other
// than 0 dial rank 0, retrying with exponential backoff (20 ms doubling to
// 1 s) until ConnectTimeout, so they may start before it. After the
// handshake below each sends a registration {rank, world, TCP address,
// Unix address, host id, hostname, pid}. Rank 0 checks world sizes, rank
// ranges and duplicates (any of which fails the whole rendezvous, with
// the reason sent to every rank), and once all World-1 ranks are in, sends
// everyone the table. Each rank then dials every lower rank (rank i dials
// j < i) and accepts the higher ones; the link uses the Unix socket when
// both ends have one and the same host id, which hashes the hostname, the
// boot id and the network namespace inode, so two containers on a machine
// use TCP. Every rank reports READY on its control connection and rank 0
// answers GO when all have, so Open returns on every rank or on none.
//
// # Authentication
//
// Every connection, rendezvous and data alike, starts with a mutual
// HMAC-SHA256 challenge-response keyed by the job token:
//
//	client → server  hello {proto, kind, run id, from rank, to rank, world, client nonce}
//	server → client  {server rank, server nonce, MAC("server", …)}
//	client → server  {MAC("client", …)}
//	server → client  OK, or an error text
//
// Both MACs cover the role, run id, kind, both ranks, the world size and
// both 32-byte nonces, each field length-prefixed, and are compared in
// constant time, so neither side can be impersonated, replayed or
// reflected by someone without the token. A connection that fails is
// closed and logged with its remote address; the refused side gets an
// error wrapping ErrAuth that says which token to check. Without a token
// a fixed public key is used, which keeps out strays and other jobs (the
// run id must match too) but authenticates nothing, so Open refuses to
// listen on a non-loopback address without one.
//
// # Data plane
//
// Send and Recv move one message: a HeaderSize-byte header (tag, sequence
// number, length; checked by the receiver, so desynchronised ranks get
// ErrDesync rather than garbage) and the payload, written with one writev
// straight from the caller's slice and read straight into the caller's
// slice. A rank may send to and receive from peers concurrently (full
// duplex); Exchange does one ring step. Data connections get
// SocketBuffer-sized SO_SNDBUF/SO_RCVBUF and TCP_NODELAY. Every call has a
// deadline of Timeout.
//
// Byte counters count payload bytes (not headers) and messages per peer
// per phase (SetPhase; the collectives name theirs), so the volume
// formulas of the collectives can be checked exactly.
//
// # Failures
//
// Each rank's rendezvous connection to rank 0 stays open as a control
// channel carrying heartbeats both ways (every Timeout/10, between 50 ms
// and 2 s). A control connection that closes without a goodbye, or stays
// silent for Timeout/2 (at least 1 s), means the rank at the other end
// died or hung. Rank 0 is the
// judge: when its control connection to rank k drops, or a rank reports
// that a send or receive with rank k failed, it takes the first such
// failure as the verdict, sends it (ABORT naming k and the reason) to
// every rank and applies it. Applying a verdict closes every data
// connection, which unblocks every send and receive in progress, and
// every operation then returns a *PeerError naming rank k, not whichever
// neighbour it happened to be talking to, for example
//
//	mesh: rank 2 failed: killed or exited: its control connection closed without a goodbye (reported by rank 0; this rank was in recv reduce-scatter with rank 3)
//
// A rank whose operation fails reports to rank 0 and waits up to
// min(max(Timeout/4, 100 ms), 5 s) for the verdict before returning what
// it saw itself. If rank 0 dies, every other rank sees its control
// connection close and names rank 0. PeerError.ExitCode is 3, trainwire's
// exit code for peer failures.
//
// Close says goodbye on the control channel before closing anything, so a
// rank that finishes (rank 0 included) is not taken for a dead one by
// ranks that are finishing too.
//
// # Tolerant meshes
//
// With Config.Tolerant (for straggler-tolerant synchronisation, where the
// survivors should go on without a dead worker) a failure drops the rank
// instead of aborting the job. Rank 0 decides as before, from a control
// connection that drops or goes silent or from a rank's report, but sends
// DEAD naming the rank instead of ABORT; every rank then closes its data
// connection to it, Send and Recv with it fail at once with a *PeerError
// naming it, IsDropped and Alive say who is left, and Config.OnDead is
// called. A rank that sees a link fail drops that peer at once itself and
// reports it. A dropped rank that is still alive (it was only hung) learns
// it was dropped and fails its own operations. If rank 0 dies the others
// drop it and go on, each judging its own links from then on. Failures
// during Open still fail Open everywhere, and Abort still aborts the
// whole job. RecvAny receives a message of any tag and length (bounded)
// with no deadline, for a reader goroutine that drains one peer.
package mesh
