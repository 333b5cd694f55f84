//go:build cuda

package gpu

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/zen"
)

// TestGPUBench (GPU machines; TRAINWIRE_GPU_BENCH=1) times every GPU codec
// per size, as JSON lines on stdout (bench/gpu/run.sh merges them with
// bench/gpu/torch_peer.py's):
//
//   - op "encode_device": EncodeTensor of a device-resident tensor — the
//     kernels plus the copy of the frame's parts to the host (what the
//     wire needs);
//   - op "encode_host": Encode from host memory (adds the upload), what
//     `compressor encode --device gpu` does per tensor;
//   - op "memcpy": a device-to-device copy of the tensor, the memory
//     bandwidth reference (reads and writes 4n bytes).
//
// Environment: TRAINWIRE_GPU_BENCH_SIZES (elements, comma-separated,
// default 1048576,67108864), TRAINWIRE_GPU_BENCH_ITERS (default 20, after
// 5 warm-ups), TRAINWIRE_GPU_BENCH_ALGOS (default all of Algos),
// TRAINWIRE_GPU_BENCH_RATIO (sparsifiers' ρ, default 0.001 as the MSTopK
// paper's Fig. 6).
//
// Zen's hash partition (algo "zen", N = 4 parts of m unique row indices;
// TRAINWIRE_GPU_BENCH_ZEN: the m values, default 28000 (a DeepFM rank's
// rows), 1048576, 16777216; "none" skips it): op "zen_hash" is ZenHash
// from host memory to the parts on the host, as `hashsync sync --device
// gpu` calls it; op "zen_hash_cpu" is lib/zen's hasher on this machine's
// CPUs in the same run, what --device cpu does.
func TestGPUBench(t *testing.T) {
	if os.Getenv("TRAINWIRE_GPU_BENCH") != "1" {
		t.Skip("set TRAINWIRE_GPU_BENCH=1")
	}
	dev := realDevice(t)
	sizes := []int{1 << 20, 64 << 20}
	if s := os.Getenv("TRAINWIRE_GPU_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	iters := 20
	if s := os.Getenv("TRAINWIRE_GPU_BENCH_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	algos := Algos
	if s := os.Getenv("TRAINWIRE_GPU_BENCH_ALGOS"); s != "" {
		algos = strings.Split(s, ",")
	}
	ratio := 0.001
	if s := os.Getenv("TRAINWIRE_GPU_BENCH_RATIO"); s != "" {
		ratio, _ = strconv.ParseFloat(s, 64)
	}
	out := json.NewEncoder(os.Stdout)
	emit := func(algo, op string, n int, ts []time.Duration, bytesOut int) {
		var sum time.Duration
		for _, d := range ts {
			sum += d
		}
		mean := sum.Seconds() / float64(len(ts))
		minT := slices.Min(ts).Seconds()
		_ = out.Encode(map[string]any{"impl": "trainwire", "device": dev.Name(), "algo": algo, "op": op,
			"elements": n, "bytes_in": 4 * n, "bytes_out": bytesOut, "iters": len(ts),
			"ms_mean": mean * 1e3, "ms_min": minT * 1e3, "GBps_in": float64(4*n) / mean / 1e9})
	}
	time1 := func(f func() error) []time.Duration {
		for range 5 {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		ts := make([]time.Duration, iters)
		for i := range ts {
			s := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			ts[i] = time.Since(s)
		}
		return ts
	}
	for _, n := range sizes {
		x := gauss(n, uint64(n))
		tt, err := dev.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := dev.Upload(make([]float32, n))
		if err != nil {
			t.Fatal(err)
		}
		emit("memcpy", "memcpy", n, time1(func() error { return tt.CopyTo(cp) }), 4*n)
		cp.Free()
		for _, algo := range algos {
			enc, err := NewEncoder(dev, algo, codec.Options{Ratio: ratio, Seed: 1}, "none", codec.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			size := 0
			step := int64(0)
			ts := time1(func() error {
				f, err := enc.EncodeTensor(tt, codec.Input{Name: "bench", Step: step})
				step++
				if f != nil {
					size = 0
					for _, p := range f.Parts {
						size += len(p.Data)
					}
				}
				return err
			})
			emit(algo, "encode_device", n, ts, size)
			emit(algo, "encode_host", n, time1(func() error {
				_, err := enc.Encode(codec.Input{Name: "bench", Step: step, Data: x})
				step++
				return err
			}), size)
			enc.Close()
		}
		tt.Free()
		st := dev.Stats()
		fmt.Fprintf(os.Stderr, "gpu bench: n=%d done; %d launches so far, %.1f GB H2D, %.1f GB D2H\n",
			n, st.Launches, float64(st.BytesHtoD)/1e9, float64(st.BytesDtoH)/1e9)
	}
	zenSizes := "28000,1048576,16777216"
	if s, ok := os.LookupEnv("TRAINWIRE_GPU_BENCH_ZEN"); ok {
		zenSizes = s
	}
	if zenSizes == "none" || zenSizes == "" {
		return
	}
	for _, f := range strings.Split(zenSizes, ",") {
		m, err := strconv.Atoi(f)
		if err != nil || m < 1 {
			t.Fatalf("TRAINWIRE_GPU_BENCH_ZEN: %q", f)
		}
		idx := uniqueRows(m, uint64(m))
		cfg := ZenConfig{N: 4, Seeds: ZenSeeds(0, 3)}
		var parts int
		emit("zen", "zen_hash", m, time1(func() error {
			p, err := dev.ZenHash(idx, cfg)
			if err == nil {
				parts = len(p.Pos)
			}
			return err
		}), 4*parts)
		var h zen.Hasher
		cpuName := fmt.Sprintf("lib/zen on the CPU, %d goroutines", runtime.GOMAXPROCS(0))
		ts := time1(func() error {
			_, err := h.Hash(idx, zen.HashConfig{N: 4, Seeds: cfg.Seeds, C: 2, R2: 0.1})
			return err
		})
		var sum time.Duration
		for _, d := range ts {
			sum += d
		}
		mean := sum.Seconds() / float64(len(ts))
		_ = out.Encode(map[string]any{"impl": "trainwire", "device": cpuName, "algo": "zen", "op": "zen_hash_cpu",
			"elements": m, "bytes_in": 4 * m, "bytes_out": 4 * m, "iters": len(ts),
			"ms_mean": mean * 1e3, "ms_min": slices.Min(ts).Seconds() * 1e3, "GBps_in": float64(4*m) / mean / 1e9})
	}
}

// uniqueRows returns m distinct row indices below 4m in a random order.
func uniqueRows(m int, seed uint64) []uint32 {
	r := rand.New(rand.NewPCG(seed, 7))
	seen := make(map[uint32]bool, m)
	idx := make([]uint32, 0, m)
	for len(idx) < m {
		v := r.Uint32N(uint32(4 * m))
		if !seen[v] {
			seen[v] = true
			idx = append(idx, v)
		}
	}
	return idx
}
