// Package serve is the request protocol of trainwire's sidecars (`hashsync
// serve`, and the other networked tools' serve verbs to come): one process
// per rank, joined to the mesh once, answering a training process's
// requests on a Unix socket while the tensors stay in shared memory
// (lib/shm). docs/serve.md is the protocol byte for byte; in short:
//
//   - A message is a 4-byte big-endian length n, then n bytes holding one
//     msgpack map (requests: id, op, seg | step, tensors, opts; replies:
//     id, ok, code, error, field, rank, size, data). n is bounded
//     (Limits.MaxMessage) before anything is read into memory.
//   - attach hands a memfd over with SCM_RIGHTS; sync names tensors by
//     (seg, off, len), each range checked against the segment's size, or
//     carries small ones inline.
//   - Replies carry the request's id. sync, attach and detach are answered
//     in request order; ping, and requests refused before they are queued,
//     may overtake them.
//   - Every sync takes the next place in the job's sequence of
//     collectives, and the ranks agree on it first (Agreer): a request one
//     rank refuses fails on every rank, naming that rank, and the sidecars
//     stay in step.
//
// Server runs the protocol for one client; a tool plugs its collective in
// as an Executor. Client is the Go client the tests and benchmarks use.
package serve
