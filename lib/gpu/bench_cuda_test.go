//go:build cuda

package gpu

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"trainwire.dev/lib/codec"
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
}
