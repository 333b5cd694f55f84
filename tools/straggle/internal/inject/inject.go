// Package inject models per-iteration compute times for straggler
// injection, as in the RNA thesis's experiments (seed-straggle.md §5.3):
// a base compute time, persistent multiplicative slowdowns of chosen ranks
// (×s), additive random delays (uniform, per group of ranks), random
// per-iteration slowdowns with probability p (Hop's methodology) and a
// clipped lognormal for inherent imbalance. A Model is pure: the same
// random stream gives the same draws, so runs replay from a seed.
package inject

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Uniform is an additive delay drawn uniformly from [Lo, Hi] milliseconds.
type Uniform struct{ Lo, Hi float64 }

// Draw returns one delay in milliseconds.
func (u Uniform) Draw(rng *rand.Rand) float64 {
	if u.Hi <= u.Lo {
		return u.Lo
	}
	return u.Lo + rng.Float64()*(u.Hi-u.Lo)
}

// Group is a set of ranks with its own additive delay (--mixed).
type Group struct {
	Ranks map[int]bool
	Delay Uniform
}

// Lognormal is a clipped lognormal iteration time in milliseconds.
type Lognormal struct {
	Mu, Sigma float64 // of the underlying normal, in log-milliseconds
	Min, Max  float64 // clip bounds, milliseconds
}

// Model draws the duration of one iteration of one rank, in milliseconds:
//
//	X = (Compute·Slow[rank] + delay(rank)) · (Factor with probability P) ,
//
// where delay is the rank's --mixed group delay if it has one, else Delay;
// with a Lognormal, Compute is replaced by a lognormal draw.
type Model struct {
	Compute    float64         // base compute time, ms
	Slow       map[int]float64 // persistent slowdown factor by rank
	Delay      Uniform         // additive delay of every rank not in a group
	Groups     []Group         // --mixed groups
	RandomP    float64         // probability of a random slowdown per iteration
	RandomF    float64         // its factor
	Lognormal  *Lognormal      // inherent imbalance, replaces Compute
	MaxPerIter float64         // 0 = unbounded
}

// Draw returns rank's next iteration time in milliseconds.
func (m *Model) Draw(rank int, rng *rand.Rand) float64 {
	base := m.Compute
	if m.Lognormal != nil {
		l := m.Lognormal
		base = math.Exp(l.Mu + l.Sigma*rng.NormFloat64())
		base = min(max(base, l.Min), l.Max)
	}
	if s, ok := m.Slow[rank]; ok {
		base *= s
	}
	d := m.Delay
	for _, g := range m.Groups {
		if g.Ranks[rank] {
			d = g.Delay
			break
		}
	}
	x := base + d.Draw(rng)
	if m.RandomP > 0 && rng.Float64() < m.RandomP {
		x *= m.RandomF
	}
	return x
}

// Mean returns the expected iteration time of rank, in milliseconds
// (ignoring the lognormal's clipping).
func (m *Model) Mean(rank int) float64 {
	base := m.Compute
	if m.Lognormal != nil {
		base = math.Exp(m.Lognormal.Mu + m.Lognormal.Sigma*m.Lognormal.Sigma/2)
	}
	if s, ok := m.Slow[rank]; ok {
		base *= s
	}
	d := m.Delay
	for _, g := range m.Groups {
		if g.Ranks[rank] {
			d = g.Delay
			break
		}
	}
	x := base + (d.Lo+d.Hi)/2
	if m.RandomP > 0 {
		x *= 1 + m.RandomP*(m.RandomF-1)
	}
	return x
}

// Flags are the injection flags shared by sync and sim.
type Flags struct {
	Compute    time.Duration `help:"Base compute time per iteration (a sleep, not a spin)." default:"0s" env:"TRAINWIRE_STRAGGLE_COMPUTE"`
	Slow       string        `help:"Persistent stragglers: 'k=K,s=S' slows ranks 0..K-1 by ×S; 'ranks=0,3,s=S' names them." env:"TRAINWIRE_STRAGGLE_SLOW"`
	Delay      string        `help:"Additive random delay per iteration on every rank: 'uniform:LO,HI' (e.g. uniform:0ms,50ms)." env:"TRAINWIRE_STRAGGLE_DELAY"`
	Mixed      []string      `help:"Group delay, repeatable: 'RANKS:uniform:LO,HI' with RANKS like 4-7 or 1,3 (mixed heterogeneity)." env:"TRAINWIRE_STRAGGLE_MIXED" sep:";"`
	RandomSlow string        `help:"Random slowdowns: 'p=P,factor=F' slows each iteration ×F with probability P (Hop's injection; P=1/n)." env:"TRAINWIRE_STRAGGLE_RANDOM_SLOW"`
	Lognormal  string        `help:"Inherent imbalance: 'mean=1219ms,sd=760ms,scale=0.01' draws compute from a lognormal clipped to [156,8000]ms·scale." env:"TRAINWIRE_STRAGGLE_LOGNORMAL"`
}

// Model parses the flags.
func (f Flags) Model() (*Model, error) {
	m := &Model{Compute: ms(f.Compute), Slow: map[int]float64{}}
	if f.Slow != "" {
		kv, err := parseKV(f.Slow)
		if err != nil {
			return nil, fmt.Errorf("--slow %q: %w", f.Slow, err)
		}
		s, err := strconv.ParseFloat(kv["s"], 64)
		if err != nil || s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
			return nil, fmt.Errorf("--slow %q: s must be a positive factor", f.Slow)
		}
		var ranks []int
		switch {
		case kv["k"] != "":
			k, err := strconv.Atoi(kv["k"])
			if err != nil || k < 0 || k > 1<<16 {
				return nil, fmt.Errorf("--slow %q: k must be a count of ranks", f.Slow)
			}
			for r := range k {
				ranks = append(ranks, r)
			}
		case kv["ranks"] != "":
			set, err := ParseRanks(kv["ranks"])
			if err != nil {
				return nil, fmt.Errorf("--slow %q: %w", f.Slow, err)
			}
			for r := range set {
				ranks = append(ranks, r)
			}
		default:
			return nil, fmt.Errorf("--slow %q: want k=K,s=S or ranks=R,...,s=S", f.Slow)
		}
		for _, r := range ranks {
			m.Slow[r] = s
		}
	}
	if f.Delay != "" {
		u, err := ParseUniform(f.Delay)
		if err != nil {
			return nil, fmt.Errorf("--delay %q: %w", f.Delay, err)
		}
		m.Delay = u
	}
	for _, g := range f.Mixed {
		i := strings.IndexByte(g, ':')
		if i < 0 {
			return nil, fmt.Errorf("--mixed %q: want RANKS:uniform:LO,HI", g)
		}
		set, err := ParseRanks(g[:i])
		if err != nil {
			return nil, fmt.Errorf("--mixed %q: %w", g, err)
		}
		u, err := ParseUniform(g[i+1:])
		if err != nil {
			return nil, fmt.Errorf("--mixed %q: %w", g, err)
		}
		m.Groups = append(m.Groups, Group{Ranks: set, Delay: u})
	}
	if f.RandomSlow != "" {
		kv, err := parseKV(f.RandomSlow)
		if err != nil {
			return nil, fmt.Errorf("--random-slow %q: %w", f.RandomSlow, err)
		}
		p, err1 := parseProb(kv["p"])
		fa, err2 := strconv.ParseFloat(kv["factor"], 64)
		if err1 != nil || err2 != nil || fa <= 0 || math.IsInf(fa, 0) || math.IsNaN(fa) {
			return nil, fmt.Errorf("--random-slow %q: want p=P (0..1 or 1/n),factor=F>0", f.RandomSlow)
		}
		m.RandomP, m.RandomF = p, fa
	}
	if f.Lognormal != "" {
		kv, err := parseKV(f.Lognormal)
		if err != nil {
			return nil, fmt.Errorf("--lognormal %q: %w", f.Lognormal, err)
		}
		mean, err1 := time.ParseDuration(kv["mean"])
		sd, err2 := time.ParseDuration(kv["sd"])
		scale := 1.0
		var err3 error
		if kv["scale"] != "" {
			scale, err3 = strconv.ParseFloat(kv["scale"], 64)
		}
		if err1 != nil || err2 != nil || err3 != nil || mean <= 0 || sd < 0 || scale <= 0 {
			return nil, fmt.Errorf("--lognormal %q: want mean=D,sd=D[,scale=F]", f.Lognormal)
		}
		mu, sigma := LognormalParams(ms(mean)*scale, ms(sd)*scale)
		m.Lognormal = &Lognormal{Mu: mu, Sigma: sigma, Min: 156 * scale, Max: 8000 * scale}
	}
	return m, nil
}

// LognormalParams returns μ and σ of the normal whose exponential has the
// given mean and standard deviation.
func LognormalParams(mean, sd float64) (mu, sigma float64) {
	s2 := math.Log(1 + sd*sd/(mean*mean))
	return math.Log(mean) - s2/2, math.Sqrt(s2)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ParseUniform parses "uniform:LO,HI" with durations (0ms,50ms).
func ParseUniform(s string) (Uniform, error) {
	rest, ok := strings.CutPrefix(s, "uniform:")
	if !ok {
		return Uniform{}, fmt.Errorf("want uniform:LO,HI")
	}
	lo, hi, ok := strings.Cut(rest, ",")
	if !ok {
		return Uniform{}, fmt.Errorf("want uniform:LO,HI")
	}
	a, err1 := time.ParseDuration(strings.TrimSpace(lo))
	b, err2 := time.ParseDuration(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || a < 0 || b < a {
		return Uniform{}, fmt.Errorf("want uniform:LO,HI with durations 0 ≤ LO ≤ HI")
	}
	return Uniform{ms(a), ms(b)}, nil
}

// ParseRanks parses "4-7", "1,3" or "0-1,5" into a set.
func ParseRanks(s string) (map[int]bool, error) {
	set := map[int]bool{}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '+' }) {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad rank %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad rank range %q", part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("rank range %q too large", part)
		}
		for r := a; r <= b; r++ {
			set[r] = true
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("no ranks in %q", s)
	}
	return set, nil
}

// parseKV parses "a=1,b=2"; a key named ranks swallows the bare numbers
// and ranges that follow it ("ranks=0,3,s=8").
func parseKV(s string) (map[string]string, error) {
	kv := map[string]string{}
	last := ""
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			if last == "ranks" {
				kv[last] += "," + part
				continue
			}
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		last = k
	}
	return kv, nil
}

func parseProb(s string) (float64, error) {
	if a, b, ok := strings.Cut(s, "/"); ok {
		x, err1 := strconv.ParseFloat(a, 64)
		y, err2 := strconv.ParseFloat(b, 64)
		if err1 != nil || err2 != nil || y == 0 {
			return 0, fmt.Errorf("bad fraction %q", s)
		}
		s = strconv.FormatFloat(x/y, 'g', -1, 64)
	}
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p < 0 || p > 1 {
		return 0, fmt.Errorf("bad probability %q", s)
	}
	return p, nil
}
