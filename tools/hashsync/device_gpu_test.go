//go:build cuda || cudaemu

package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/gpu"
)

// TestSyncOnDevice: `hashsync sync --device gpu` (zen's Algorithm 1 on the
// GPU, through lib/gpu) gives every rank the same result as `hashsync ref`
// bit for bit, with ranks 0 and 2 hashing on the device and rank 1 on the
// CPU in the same job, including when the serial memory overflows. Built
// with -tags cuda it runs on a GPU (bench/gpu/run.sh, with
// bin/hashsync-cuda from bench/gpu/build.sh); with -tags cudaemu the
// device is the kernels' CUDA C run on the CPU (make test-cudaemu).
func TestSyncOnDevice(t *testing.T) {
	tag := "cudaemu"
	if gpu.Built {
		tag = "cuda"
	}
	gbin := clitest.BinaryTags(t, "hashsync", tag)
	bin := clitest.Binary(t, "hashsync")
	dir := t.TempDir()
	const world = 3
	files := genFiles(t, dir, world, "--model", "zipf", "--rows", "20000", "--width", "4", "--density", "0.03", "--skew", "1.1", "--steps", "2", "--tensors", "2", "--seed", "5")
	out, err := exec.Command(bin, append([]string{"ref"}, files...)...).Output()
	require.NoError(t, err)
	ref := frames(t, out)
	onGPU := map[int]bool{0: true, 2: true}
	for _, args := range [][]string{
		{"--scheme", "zen"},
		{"--scheme", "zen", "--partitioner", "hash", "--r1-factor", "0.05", "--r2-fraction", "0.01"}, // serial memory overflows (on the CPU ranks too)
		{"--scheme", "bp-coo"},
		{"--scheme", "auto", "--profile-iters", "1"},
	} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
			defer cancel()
			ps := syncRanksWith(t, ctx, world, func(r int) (string, []string) {
				if onGPU[r] {
					return gbin, []string{"--device", "gpu"}
				}
				return bin, nil
			}, func(r int) io.Reader { return fileReader(t, files[r]) }, append(args, "--seed", "3")...)
			for r, p := range ps {
				require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
				sameTensors(t, ref, frames(t, p.Stdout.Bytes()), fmt.Sprintf("rank %d", r))
				if said := strings.Contains(p.Stderr.String(), "hashing on the GPU"); said != onGPU[r] {
					t.Errorf("rank %d (GPU %v) stderr: %s", r, onGPU[r], p.Stderr.String())
				}
			}
		})
	}
}
