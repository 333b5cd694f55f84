package codec

import (
	"trainwire.dev/lib/rng"

	"fmt"
	"math"

	"trainwire.dev/lib/wire"
)

// powersgd (Vogels et al.'19, GRACE "powersgd") with rank r and warm
// start. A tensor of shape [n, …] is the matrix M of n rows and m =
// numel/n columns. With Q (m×r) the previous step's Q (state slot "q"),
// or on the first step a standard-normal matrix drawn from the stream
// (seed, name, step 0): P = M·Q, P is orthonormalised (modified
// Gram–Schmidt, float64), Q = Mᵀ·P, and the frame carries parts "p"
// f32[n, r] and "q" f32[m, r]; it decodes to P·Qᵀ. Q is kept as the next
// warm start. r is min(rank, n, m). Tensors with fewer than two dimensions
// (or a dimension of 1) travel uncompressed as part "data" f32[d], as
// PowerSGD does with biases.
type powersgd struct {
	rank int64
	seed uint64
}

func (c *powersgd) Algo() string { return "powersgd" }
func (c *powersgd) Params() map[string]any {
	return map[string]any{"rank": c.rank, "seed": seedParam(c.seed)}
}

func (c *powersgd) dims(shape []int64) (n, m, r int64, ok bool) {
	d, _ := numel(shape)
	if len(shape) < 2 || shape[0] <= 1 || d/max(shape[0], 1) <= 1 {
		return 0, 0, 0, false
	}
	n = shape[0]
	m = d / n
	return n, m, min(c.rank, n, m), true
}

func (c *powersgd) Size(shape []int64) int64 {
	n, m, r, ok := c.dims(shape)
	if !ok {
		d, _ := numel(shape)
		return 4 * d
	}
	return 4 * r * (n + m)
}

func (c *powersgd) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	shape := shapeOrFlat(in.Shape, len(in.Data))
	n64, m64, r64, ok := c.dims(shape)
	if !ok {
		data := append([]float32(nil), in.Data...)
		return frame(c, in, part("data", wire.F32, f32bytes(data), int64(len(data)))), nil
	}
	n, m, r := int(n64), int(m64), int(r64)
	st := in.State
	if st == nil {
		st = &State{}
	}
	M := in.Data
	var q []float32
	if st.Has("q", m*r) {
		q = st.Slots["q"]
	} else {
		q = st.Slot("q", m*r)
		s := rng.Seq{Key: rng.Key(c.seed, 0, in.Name, rng.PurposePowerSGD)}
		for i := range q {
			q[i] = float32(normal(&s))
		}
	}
	// P = M·Q (n×r), in float64.
	p := make([]float64, n*r)
	mulMQ(p, M, q, n, m, r)
	orthonormalize(p, n, r)
	pf := make([]float32, n*r)
	for i, v := range p {
		pf[i] = float32(v)
	}
	// Q = Mᵀ·P (m×r), from the f32 P that travels.
	qn := make([]float64, m*r)
	mulMtP(qn, M, pf, n, m, r)
	qf := make([]float32, m*r)
	for i, v := range qn {
		qf[i] = float32(v)
	}
	copy(q, qf)
	return frame(c, in, part("p", wire.F32, f32bytes(pf), n64, r64), part("q", wire.F32, f32bytes(qf), m64, r64)), nil
}

// orthonormalize runs modified Gram–Schmidt on the r columns of the n×r
// row-major a; a zero column stays zero.
func orthonormalize(a []float64, n, r int) {
	for t := 0; t < r; t++ {
		for s := 0; s < t; s++ {
			var dot float64
			for i := 0; i < n; i++ {
				dot += a[i*r+t] * a[i*r+s]
			}
			for i := 0; i < n; i++ {
				a[i*r+t] -= dot * a[i*r+s]
			}
		}
		var nn float64
		for i := 0; i < n; i++ {
			nn += a[i*r+t] * a[i*r+t]
		}
		if nn > 0 {
			inv := 1 / math.Sqrt(nn)
			for i := 0; i < n; i++ {
				a[i*r+t] *= inv
			}
		}
	}
}

// normal draws a standard normal (Box–Muller on two 53-bit uniforms).
func normal(s *rng.Seq) float64 {
	u1 := (float64(s.Next()>>11) + 1) / (1 << 53)
	u2 := float64(s.Next()>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

func (c *powersgd) check(f *wire.Compressed) error {
	n, m, r, ok := c.dims(f.Shape)
	if !ok {
		d, _ := numel(f.Shape)
		return checkParts(f, partSpec{"data", wire.F32, d})
	}
	if err := checkParts(f, partSpec{"p", wire.F32, n * r}, partSpec{"q", wire.F32, m * r}); err != nil {
		return err
	}
	if len(f.Parts[0].Shape) != 2 || f.Parts[0].Shape[0] != n || len(f.Parts[1].Shape) != 2 || f.Parts[1].Shape[0] != m {
		return fmt.Errorf("parts p %v and q %v, want [%d %d] and [%d %d]", f.Parts[0].Shape, f.Parts[1].Shape, n, r, m, r)
	}
	return nil
}

func (c *powersgd) decode(f *wire.Compressed, dst []float32) error {
	n, m, r, ok := c.dims(f.Shape)
	if !ok {
		copy(dst, f32s(f.Parts[0].Data))
		return nil
	}
	mulPQt(dst, f32s(f.Parts[0].Data), f32s(f.Parts[1].Data), int(n), int(m), int(r))
	return nil
}

func init() {
	register(factory{
		info: Info{Algo: "powersgd", Kind: "low-rank",
			Params:      map[string]string{"rank": "1", "seed": "0"},
			SizeFormula: "4r(n+m) for an n×m matrix (shape [n, …], m = d/n), r = min(rank, n, m); 4d for vectors",
			Summable:    "yes when the frames share P (after its allreduce): Q parts add",
			Doc:         "PowerSGD rank-r with warm-start Q (state slot q); pair with --memory powersgd"},
		fromOptions: func(o Options) (Codec, error) {
			r := o.Rank
			if r == 0 {
				r = 1
			}
			if r < 1 || r > 1024 {
				return nil, fmt.Errorf("codec: powersgd: rank %d not in [1, 1024]", r)
			}
			return &powersgd{r, o.Seed}, nil
		},
		fromParams: func(m map[string]any) (Codec, error) {
			r, err := pInt(m, "rank", 1, 1024)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			return &powersgd{rank: r, seed: s}, err
		},
	})
}
