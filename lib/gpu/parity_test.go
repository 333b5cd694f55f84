package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// testDevices returns the devices the parity suite runs on: the kernel
// emulator always, and the GPU in binaries built with -tags cuda. (The
// CUDA C run on the CPU, -tags cudaemu, is slower and has its own reduced
// suite: TestCUDAEmu.)
func testDevices(t *testing.T) []*Device {
	t.Helper()
	devs := []*Device{newDevice(newEmu(1))}
	if d := realDevice(t); d != nil {
		devs = append(devs, d)
	}
	return devs
}

// wireBytes is the frame as it travels: a one-frame stream.
func wireBytes(t *testing.T, f wire.Frame) []byte {
	t.Helper()
	var b bytes.Buffer
	w := wire.NewWriter(&b, "parity")
	if err := w.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type input struct {
	name string
	x    []float32
}

func gauss(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// inputs covers the edge cases of every kernel: empty and tiny tensors,
// tails of 8-element groups and of 64Ki reduction blocks, odd lengths
// (QSGD's pairs), zeros and −0, ties (fp16-quantised data), constant and
// all-zero tensors, heavy tails, and values beyond fp16's range and in its
// subnormals.
func inputs() []input {
	var in []input
	for _, n := range []int{0, 1, 7, 8, 9, 1000} {
		in = append(in, input{fmt.Sprintf("gauss%d", n), gauss(n, uint64(n))})
	}
	in = append(in, input{"gauss2blk+77", gauss(2*rblock+77, 3)})
	ties := gauss(rblock+4099, 4)
	for i := range ties {
		ties[i] = codec.F16ToF32(codec.F32ToF16(ties[i]))
		if i%97 == 0 {
			ties[i] = 0
		}
		if i%101 == 0 {
			ties[i] = float32(math.Copysign(0, -1))
		}
	}
	in = append(in, input{"ties", ties})
	c := make([]float32, 5000)
	for i := range c {
		c[i] = 0.5
		if i%3 == 0 {
			c[i] = -0.5
		}
	}
	in = append(in, input{"constant", c}, input{"zeros", make([]float32, 3001)})
	r := rand.New(rand.NewPCG(9, 9))
	heavy := make([]float32, 40000)
	for i := range heavy {
		u := r.Float64()
		heavy[i] = float32(math.Copysign(math.Pow(1-u, -1.0/3)-1, r.Float64()-0.5))
		switch i % 1000 {
		case 1:
			heavy[i] = 7e4 // beyond fp16
		case 2:
			heavy[i] = -3e-6 // fp16 subnormal
		case 3:
			heavy[i] = 1e-9 // rounds to zero in fp16
		case 4:
			heavy[i] = 65519.99 // rounds to 65504
		}
	}
	in = append(in, input{"heavy", heavy})
	return in
}

type variant struct {
	algo string
	o    codec.Options
}

func variants() []variant {
	var v []variant
	for _, a := range []string{"signsgd", "efsignsgd", "onebit", "fp16", "bf16"} {
		v = append(v, variant{a, codec.Options{}})
	}
	for _, s := range []uint64{0, 1<<63 + 5} {
		v = append(v, variant{"terngrad", codec.Options{Seed: s}})
		for _, l := range []int64{1, 64, 127} {
			v = append(v, variant{"qsgd", codec.Options{Seed: s, Levels: l}})
		}
	}
	for _, r := range []float64{0.001, 0.01, 0.3, 1} {
		v = append(v, variant{"topk", codec.Options{Ratio: r}})
	}
	v = append(v, variant{"topk", codec.Options{K: 1}})
	for _, r := range []float64{0.001, 0.01, 0.2, 0.6} {
		for _, n := range []int64{30, 5} {
			v = append(v, variant{"mstopk", codec.Options{Ratio: r, Samplings: n, Seed: 11}})
		}
	}
	v = append(v, variant{"mstopk", codec.Options{K: 1, Samplings: 64}})
	return v
}

// TestParity encodes every input with every GPU codec on every device and
// requires the wire bytes of lib/codec's CPU encoder, step by step with
// error feedback (three steps, so the residual matters), and the same
// residual state afterwards.
func TestParity(t *testing.T) {
	for _, dev := range testDevices(t) {
		mems := []string{"none", "residual"}
		checkParity(t, dev, variants(), inputs(), mems)
	}
}

// checkParity runs the parity of every variant × memory over the inputs,
// three steps each, on dev.
func checkParity(t *testing.T, dev *Device, vs []variant, ins []input, mems []string) {
	for _, v := range vs {
		for _, mem := range mems {
			t.Run(fmt.Sprintf("%s/%s/%+v/%s", dev.Name(), v.algo, v.o, mem), func(t *testing.T) {
				mo := codec.MemoryOptions{Beta: 0.9, Gamma: 1.25}
				cc, err := codec.New(v.algo, v.o)
				if err != nil {
					t.Fatal(err)
				}
				cm, _ := codec.NewMemory(mem, mo)
				cpu := &codec.Encoder{Codec: cc, Memory: cm, Store: codec.NewStore()}
				g, err := NewEncoder(dev, v.algo, v.o, mem, mo)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				for step := int64(0); step < 3; step++ {
					for _, in := range ins {
						x := in.x
						if step > 0 && len(x) > 0 { // a new gradient each step
							x = append([]float32(nil), x...)
							for i := range x {
								x[i] *= 1 - 0.1*float32(step)
							}
						}
						ci := codec.Input{Name: in.name, Step: step, Rank: 2, Data: x}
						want, _, werr := cpu.Encode(ci)
						got, gerr := g.Encode(ci)
						if werr != nil || gerr != nil {
							if fmt.Sprint(werr) != fmt.Sprint(gerr) {
								t.Fatalf("%s step %d: cpu error %v, gpu error %v", in.name, step, werr, gerr)
							}
							continue
						}
						wb, gb := wireBytes(t, want), wireBytes(t, got)
						if !bytes.Equal(wb, gb) {
							t.Fatalf("%s step %d: frames differ\ncpu %s\ngpu %s", in.name, step, describe(want), describe(got))
						}
					}
				}
				if mem != "none" {
					if err := g.SyncStore(); err != nil {
						t.Fatal(err)
					}
					for _, in := range ins {
						ce := cpu.Store.Get(in.name).Slots["e"]
						ge := g.Store.Get(in.name).Slots["e"]
						if !bytes.Equal(f32b(ce), f32b(ge)) {
							t.Fatalf("%s: residual differs", in.name)
						}
					}
				}
			})
		}
	}
}

func describe(f *wire.Compressed) string {
	s := fmt.Sprintf("%s %v %v:", f.Algo, f.Params, f.Shape)
	for _, p := range f.Parts {
		d := p.Data
		if len(d) > 48 {
			d = d[:48]
		}
		s += fmt.Sprintf(" %s%v[%d]=%x", p.Name, p.Shape, len(p.Data), d)
	}
	return s
}

// TestParityNonFinite: NaN and ±Inf are rejected with lib/codec's error
// (naming the first bad element) and leave the residual untouched.
func TestParityNonFinite(t *testing.T) {
	for _, dev := range testDevices(t) {
		for _, algo := range Algos {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
				x := gauss(rblock+100, 5)
				x[rblock+17] = bad
				x[rblock+50] = bad
				for _, mem := range []string{"none", "residual"} {
					cc, _ := codec.New(algo, codec.Options{})
					cm, _ := codec.NewMemory(mem, codec.MemoryOptions{})
					cpu := &codec.Encoder{Codec: cc, Memory: cm}
					g, err := NewEncoder(dev, algo, codec.Options{}, mem, codec.MemoryOptions{})
					if err != nil {
						t.Fatal(err)
					}
					in := codec.Input{Name: "bad", Data: x}
					_, _, werr := cpu.Encode(in)
					_, gerr := g.Encode(in)
					var ne *codec.NonFiniteError
					if !errors.As(gerr, &ne) || fmt.Sprint(werr) != fmt.Sprint(gerr) {
						t.Fatalf("%s %s %v: cpu %v, gpu %v", dev.Name(), algo, bad, werr, gerr)
					}
					g.Close()
				}
			}
		}
	}
}

// TestEncoderState: a residual saved by SyncStore and loaded by a new
// encoder continues bit for bit (the --state-out / --state-in path).
func TestEncoderState(t *testing.T) {
	for _, dev := range testDevices(t) {
		o := codec.Options{Ratio: 0.05}
		a, _ := NewEncoder(dev, "topk", o, "residual", codec.MemoryOptions{})
		x0, x1 := gauss(9000, 1), gauss(9000, 2)
		if _, err := a.Encode(codec.Input{Name: "w", Data: x0}); err != nil {
			t.Fatal(err)
		}
		if err := a.SyncStore(); err != nil {
			t.Fatal(err)
		}
		b, _ := NewEncoder(dev, "topk", o, "residual", codec.MemoryOptions{})
		b.Store = a.Store
		fa, err := a.Encode(codec.Input{Name: "w", Step: 1, Data: x1})
		if err != nil {
			t.Fatal(err)
		}
		fb, err := b.Encode(codec.Input{Name: "w", Step: 1, Data: x1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wireBytes(t, fa), wireBytes(t, fb)) {
			t.Fatal("a checkpointed residual does not continue bit for bit")
		}
		a.Close()
		b.Close()
	}
}

func TestNewEncoderRejects(t *testing.T) {
	dev := newDevice(newEmu(1))
	if _, err := NewEncoder(dev, "powersgd", codec.Options{}, "none", codec.MemoryOptions{}); err == nil {
		t.Fatal("powersgd has no GPU kernels but NewEncoder accepted it")
	}
	if _, err := NewEncoder(dev, "topk", codec.Options{}, "dgc", codec.MemoryOptions{}); err == nil {
		t.Fatal("dgc memory is not on the GPU but NewEncoder accepted it")
	}
	if _, err := NewEncoder(dev, "qsgd", codec.Options{Levels: 200}, "none", codec.MemoryOptions{}); err == nil {
		t.Fatal("qsgd levels 200 accepted")
	}
}

// TestEncodeTensor: encoding a device-resident tensor gives Encode's
// frames, and its non-finite error names the same element.
func TestEncodeTensor(t *testing.T) {
	for _, dev := range testDevices(t) {
		x := gauss(rblock+333, 8)
		tt, err := dev.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tt.Download()
		if err != nil || !bytes.Equal(f32b(back), f32b(x)) {
			t.Fatalf("upload/download round trip: %v", err)
		}
		cp, _ := dev.Upload(make([]float32, len(x)))
		if err := tt.CopyTo(cp); err != nil {
			t.Fatal(err)
		}
		if back, _ := cp.Download(); !bytes.Equal(f32b(back), f32b(x)) {
			t.Fatal("CopyTo")
		}
		for _, algo := range Algos {
			for _, mem := range []string{"none", "residual"} {
				a, _ := NewEncoder(dev, algo, codec.Options{Seed: 3}, mem, codec.MemoryOptions{})
				b, _ := NewEncoder(dev, algo, codec.Options{Seed: 3}, mem, codec.MemoryOptions{})
				for step := int64(0); step < 2; step++ {
					fa, err := a.Encode(codec.Input{Name: "t", Step: step, Data: x})
					if err != nil {
						t.Fatal(err)
					}
					fb, err := b.EncodeTensor(tt, codec.Input{Name: "t", Step: step})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(wireBytes(t, fa), wireBytes(t, fb)) {
						t.Fatalf("%s %s: EncodeTensor differs from Encode", algo, mem)
					}
				}
				a.Close()
				b.Close()
			}
		}
		x[77] = float32(math.Inf(1))
		bad, _ := dev.Upload(x)
		g, _ := NewEncoder(dev, "fp16", codec.Options{}, "none", codec.MemoryOptions{})
		_, err = g.EncodeTensor(bad, codec.Input{Name: "t"})
		if want := codec.CheckFinite("t", x); fmt.Sprint(err) != fmt.Sprint(want) {
			t.Fatalf("EncodeTensor non-finite: %v, want %v", err, want)
		}
		tt.Free()
		cp.Free()
		bad.Free()
	}
}
