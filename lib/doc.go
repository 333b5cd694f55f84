// Package lib is the root of trainwire's shared library module. The code
// lives in its sub-packages: wire (the stream contract), launch (rank and
// world from launchers), mesh (rendezvous and the TCP/Unix mesh),
// collective (ring allreduce and friends), tensor (float32 kernels) and cli
// (the verbs every tool shares).
package lib
