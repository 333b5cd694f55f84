//go:build cudaemu

package gpu

import (
	"fmt"
	"math"
	"testing"

	"trainwire.dev/lib/codec"
)

// TestCUDAEmu runs the CUDA C itself (kernels/*.cu compiled by g++ with
// cudaemu.h: every CUDA thread a fiber, real barriers for __syncthreads
// and the warp shuffles) behind the same host code, against lib/codec's
// frames and the Zen references: `go test -tags cudaemu -run CUDAEmu
// ./gpu/`. Fibers are slow, so the inputs are smaller than TestParity's,
// but still cover group and block tails, ties, zeros, fp16's extremes and
// two 64Ki reduction blocks.
func TestCUDAEmu(t *testing.T) {
	dev := newDevice(newCudaEmu())
	var small []input
	for _, in := range inputs() {
		switch {
		case len(in.x) <= 5000:
			small = append(small, in)
		case in.name == "heavy":
			small = append(small, input{in.name, in.x[:4005]})
		}
	}
	var vs []variant
	seen := map[string]bool{}
	for _, v := range variants() {
		if !seen[v.algo] || v.algo == "mstopk" && v.o.Ratio >= 0.2 {
			vs = append(vs, v)
			seen[v.algo] = true
		}
	}
	checkParity(t, dev, vs, small, []string{"none", "residual"})
	// two reduction blocks, once per codec
	big := []input{{"2blk", gauss(rblock+77, 12)}}
	for _, algo := range Algos {
		checkParity(t, dev, []variant{{algo, codec.Options{Seed: 4, Ratio: 0.01}}}, big, []string{"none"})
	}
	t.Run("nonfinite", func(t *testing.T) {
		x := gauss(5000, 5)
		x[4001] = float32(math.NaN())
		for _, algo := range Algos {
			cc, _ := codec.New(algo, codec.Options{})
			_, werr := cc.Encode(codec.Input{Name: "bad", Data: x})
			g, _ := NewEncoder(dev, algo, codec.Options{}, "none", codec.MemoryOptions{})
			_, gerr := g.Encode(codec.Input{Name: "bad", Data: x})
			if werr == nil || fmt.Sprint(werr) != fmt.Sprint(gerr) {
				t.Fatalf("%s: cpu %v, cudaemu %v", algo, werr, gerr)
			}
		}
	})
	t.Run("zen", func(t *testing.T) {
		g := sparseGrad(20000, 0.05, 3)
		for _, cfg := range []ZenConfig{{N: 4}, {N: 3, C: 0.3, Seeds: ZenSeeds(5, 2)}} {
			want, _ := ZenPartitionCPU(g, cfg)
			got, err := dev.ZenPartition(g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got.Sort()
			for j := range want.Idx {
				if len(want.Idx[j]) != len(got.Idx[j]) {
					t.Fatalf("%+v: partition %d: %d vs %d", cfg, j, len(want.Idx[j]), len(got.Idx[j]))
				}
				for q := range want.Idx[j] {
					if want.Idx[j][q] != got.Idx[j][q] || want.Vals[j][q] != got.Vals[j][q] {
						t.Fatalf("%+v: partition %d differs at %d", cfg, j, q)
					}
				}
			}
		}
		acc := sparseGrad(30011, 0.3, 4)
		bm, vals, err := dev.HashBitmapEncode(acc)
		if err != nil {
			t.Fatal(err)
		}
		bmc, valsc := HashBitmapEncodeCPU(acc)
		if string(bm) != string(bmc) || string(f32b(vals)) != string(f32b(valsc)) {
			t.Fatal("bitmap encode differs")
		}
		table := make([]uint32, len(acc))
		for i := range table {
			table[i] = uint32(3*i + 1)
		}
		tab, _ := dev.UploadTable(table)
		out, outc := make([]float32, 3*len(acc)+1), make([]float32, 3*len(acc)+1)
		idx, err := dev.HashBitmapDecode(tab, bm, vals, out)
		if err != nil {
			t.Fatal(err)
		}
		idxc, _ := HashBitmapDecodeCPU(table, bm, vals, outc)
		if len(idx) != len(idxc) || string(f32b(out)) != string(f32b(outc)) {
			t.Fatal("bitmap decode differs")
		}
		for i := range idx {
			if idx[i] != idxc[i] {
				t.Fatal("bitmap decode indices differ")
			}
		}
	})
}

const emulated = true
