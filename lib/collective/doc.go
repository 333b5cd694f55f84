// Package collective runs the collectives of data-parallel training on a
// mesh.Mesh: ring AllReduce (sum, float32, in place), ReduceScatter,
// AllGather, AllGatherV, AllToAllV, Broadcast from any root and Barrier.
//
// # Algorithms
//
// AllReduce is the bandwidth-optimal ring: a reduce-scatter in n−1 steps
// then an allgather in n−1 steps. The buffer of L elements is split into n
// chunks as evenly as possible (the first L mod n chunks have one element
// more; see Chunk), for any L, including L < n and 0. At step t rank r
// sends chunk (r−t−1) mod n to rank r+1 and receives chunk (r−t−2) mod n
// from rank r−1, adding it into its own (reduce-scatter, t < n−1) or
// storing it (allgather), so after the reduce-scatter rank r holds the
// sum of chunk r, and after the allgather everyone holds every chunk.
// Each rank sends exactly 4·(L − |chunk r|) payload bytes in the
// reduce-scatter and 4·(L − |chunk r+1|) in the allgather: 2(n−1)/n·M in
// all when n divides L, the textbook volume; the mesh's byte counters
// (phases "reduce-scatter" and "allgather") measure it.
//
// The ring is pipelined: chunks are cut into segments (a quarter of a
// chunk, at least 256 KiB, at most Options.Segment bytes, default 1 MiB), a sender goroutine streams segments to the next
// rank while the caller's goroutine receives segments from the previous
// one and reduces each as it lands, and a segment is forwarded as soon as
// it has been reduced, so sending, receiving and adding overlap across the
// 2(n−1) steps. Sends go straight from the caller's buffer and allgather
// receives land straight in it; reduce-scatter receives land in one
// segment of scratch, which tensor.Add (blas32) sums into the buffer.
//
// Every rank ends with bit-identical results: each chunk is summed once,
// on its way around the ring, and the allgather copies those bytes
// everywhere. The sum differs from a sequential one only by float
// rounding order.
//
// ReduceScatter is the first half of the ring, AllGather(V) the second
// half on the gathered layout, Broadcast a pipelined chain from the root
// (each rank but the last forwards every segment once), AllToAllV n−1
// rounds of pairwise full-duplex exchanges, and Barrier a dissemination
// barrier of empty messages in ⌈log2 n⌉ rounds.
//
// # Use
//
// A Comm is a mesh plus scratch space; all ranks must call the same
// collectives in the same order with matching sizes (a mismatch is
// detected by the mesh's message headers and fails the job). A Comm is
// not safe for concurrent use. Errors from a failed rank are the mesh's
// *mesh.PeerError (exit code 3), naming the failed rank; a cancelled
// context aborts the job on every rank.
package collective
