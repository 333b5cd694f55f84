package csync

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/wire"
)

// Plan is what `compressor sync --plan` executes: a `compressor plan`
// stream (one option per gradient: which collective, with the plan's
// codec), a `fuser plan` stream (groups of gradients synchronised as one
// concatenated tensor), or both.
type Plan struct {
	// Model names the model the plans are for.
	Model string
	// Codec is the compression plan's codec ("" without one).
	Codec string
	// Tensors are the compression plan's gradients by name (nil without one).
	Tensors map[string]PlanTensor
	// Groups are the fusion plan's groups, by tensor name, in the plan's
	// order (nil without one).
	Groups  [][]string
	groupOf map[string]int
}

// PlanTensor is one gradient of a compression plan.
type PlanTensor struct {
	Index int
	Numel int64
	// Path is the plan's option (device-agnostic), Collective what runs it.
	Path, Collective string
}

// PlanError is a plan that cannot be read or does not fit the tensors:
// exit code 2.
type PlanError struct{ Err error }

func (e *PlanError) Error() string { return e.Err.Error() }
func (e *PlanError) Unwrap() error { return e.Err }

// ExitCode is 2 (bad input).
func (e *PlanError) ExitCode() int { return exit.BadInput }

func planErr(format string, a ...any) error { return &PlanError{fmt.Errorf(format, a...)} }

// maxPlanItems bounds a plan's gradients.
const maxPlanItems = 1 << 20

// ReadPlan reads one plan stream (of either kind) into p; call it once
// per file. A stream with both kinds, or two plans of one kind, or plans
// of two models, is an error.
func (p *Plan) ReadPlan(r io.Reader, lim wire.Limits) error {
	rd := wire.NewReader(r, lim)
	var comp []*wire.Plan
	var fus *wire.Plan
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return planErr("plan: %w", err)
		}
		pf, ok := f.(*wire.Plan)
		if !ok {
			continue // the planners' stats frames
		}
		switch pf.Kind {
		case "compression":
			comp = append(comp, pf)
			if len(comp) > maxPlanItems {
				return planErr("plan: more than %d gradients", maxPlanItems)
			}
		case "fusion":
			if fus != nil {
				return planErr("plan: two fusion plans in one stream")
			}
			fus = pf
		default:
			return planErr("plan: a %q plan frame: compressor sync runs compression and fusion plans", pf.Kind)
		}
	}
	model := ""
	if h := rd.Header(); h != nil {
		model = h.Meta["model"]
	}
	switch {
	case len(comp) > 0 && fus != nil:
		return planErr("plan: a stream with a compression and a fusion plan: give them as two files")
	case len(comp) > 0:
		if p.Tensors != nil {
			return planErr("plan: two compression plans")
		}
		if err := p.readCompression(comp); err != nil {
			return err
		}
	case fus != nil:
		if p.Groups != nil {
			return planErr("plan: two fusion plans")
		}
		if m, ok := fus.Meta["model"].(string); ok {
			model = m
		}
		if err := p.readFusion(fus); err != nil {
			return err
		}
	default:
		return planErr("plan: no plan frame (want the output of compressor plan or fuser plan, --format frames)")
	}
	if model != "" {
		if p.Model != "" && p.Model != model {
			return planErr("plan: plans for two models, %q and %q", p.Model, model)
		}
		p.Model = model
	}
	return nil
}

func (p *Plan) readCompression(fs []*wire.Plan) error {
	p.Tensors = map[string]PlanTensor{}
	for i, f := range fs {
		if len(f.Items) != 1 {
			return planErr("compression plan: frame %d has %d items, want 1", i, len(f.Items))
		}
		it := f.Items[0]
		name, ok1 := it["name"].(string)
		path, ok2 := it["path"].(string)
		numel, ok3 := intOf(it["numel"])
		if !ok1 || !ok2 || !ok3 || name == "" || numel < 0 {
			return planErr("compression plan: frame %d: item needs name, path and numel ≥ 0", i)
		}
		codec, _ := f.Meta["codec"].(string)
		if i == 0 {
			p.Codec = codec
		} else if codec != p.Codec {
			return planErr("compression plan: frame %d is for codec %q, frame 0 for %q", i, codec, p.Codec)
		}
		if _, dup := p.Tensors[name]; dup {
			return planErr("compression plan: tensor %q planned twice", name)
		}
		coll, err := CollectiveForPath(path)
		if err != nil {
			return planErr("compression plan: tensor %q: %v", name, err)
		}
		p.Tensors[name] = PlanTensor{Index: i, Numel: numel, Path: path, Collective: coll}
	}
	if p.Codec == "" {
		return planErr("compression plan: no codec in its frames' meta")
	}
	return nil
}

func (p *Plan) readFusion(f *wire.Plan) error {
	if len(f.Groups) != len(f.Items) {
		return planErr("fusion plan: %d groups, %d items", len(f.Groups), len(f.Items))
	}
	p.Groups = [][]string{}
	p.groupOf = map[string]int{}
	next := int64(0)
	for g, rg := range f.Groups {
		if rg[0] != next || rg[1] < rg[0] || rg[1]-rg[0] >= maxPlanItems {
			return planErr("fusion plan: group %d covers [%d, %d]; groups must cover the gradients in order from 0", g, rg[0], rg[1])
		}
		next = rg[1] + 1
		names, ok := f.Items[g]["names"].([]any)
		if !ok || int64(len(names)) != rg[1]-rg[0]+1 {
			return planErr("fusion plan: group %d [%d, %d] lists %d names", g, rg[0], rg[1], len(names))
		}
		grp := make([]string, len(names))
		for i, v := range names {
			s, ok := v.(string)
			if !ok || s == "" {
				return planErr("fusion plan: group %d: name %d is not a non-empty string", g, i)
			}
			if _, dup := p.groupOf[s]; dup {
				return planErr("fusion plan: tensor %q in two groups", s)
			}
			p.groupOf[s] = g
			grp[i] = s
		}
		p.Groups = append(p.Groups, grp)
	}
	return nil
}

func intOf(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case int:
		return int64(x), true
	}
	return 0, false
}

// GroupOf returns the fusion group of tensor name and its members
// (ok false without a fusion plan).
func (p *Plan) GroupOf(name string) (g int, members []string, ok bool, err error) {
	if p == nil || p.Groups == nil {
		return 0, nil, false, nil
	}
	g, in := p.groupOf[name]
	if !in {
		return 0, nil, true, planErr("tensor %q is in no group of the fusion plan for model %q (%d groups): a plan for another model?", name, p.Model, len(p.Groups))
	}
	return g, p.Groups[g], true, nil
}

// Check checks tensor name of numel elements against the compression
// plan, and returns its entry (ok false without a compression plan).
func (p *Plan) Check(name string, numel int64) (PlanTensor, bool, error) {
	if p == nil || p.Tensors == nil {
		return PlanTensor{}, false, nil
	}
	t, in := p.Tensors[name]
	if !in {
		return t, true, planErr("tensor %q is not in the compression plan for model %q (%d gradients): a plan for another model?", name, p.Model, len(p.Tensors))
	}
	if t.Numel != numel {
		return t, true, planErr("tensor %q has %d elements, the compression plan for model %q says %d: a plan for another model?", name, numel, p.Model, t.Numel)
	}
	return t, true, nil
}

// CollectiveForPath maps a decision-tree path (compressor plan's, devices
// optional) to the collective that runs it. Hierarchical paths run their
// inter-machine phase over all ranks (the intra-machine steps are
// dropped, and a compression decoded right after without a collective in
// between cancels out); Reduce, Broadcast and Gather run as their divisible
// counterparts reduce-scatter, allgather and alltoall.
func CollectiveForPath(path string) (string, error) {
	var steps []string
	for _, f := range strings.Split(path, ">") {
		f = strings.TrimSpace(f)
		f, _, _ = strings.Cut(f, "@")
		if f == "" {
			return "", fmt.Errorf("path %q: empty step", path)
		}
		if strings.HasPrefix(f, "I1:") || strings.HasPrefix(f, "I2:") {
			continue
		}
		for _, rep := range [][2]string{{"X1:", "F1:"}, {"X2:", "F2:"}, {"X:", "F:"}} {
			if rest, ok := strings.CutPrefix(f, rep[0]); ok {
				f = rep[1] + rest
			}
		}
		for _, rep := range [][2]string{{":Reduce", ":RS"}, {":BC", ":AG"}, {":GA", ":A2A"}} {
			f = strings.Replace(f, rep[0], rep[1], 1)
		}
		steps = append(steps, f)
	}
	for cancelled := true; cancelled; {
		cancelled = false
		for i := 0; i+1 < len(steps); i++ {
			if steps[i] == "C" && steps[i+1] == "D" {
				steps = slices.Delete(steps, i, i+2)
				cancelled = true
				break
			}
		}
	}
	flat := strings.Join(steps, " > ")
	coll, ok := map[string]string{
		"F:AR":                             Dense,
		"F1:RS > F2:AG":                    Dense,
		"F1:RS > C > F2:AG* > D":           RSAG,
		"C > F:AG* > D":                    AllGather,
		"C > F1:A2A* > F2:AG* > D":         A2AAG,
		"C > F1:A2A* > D > F2:AG":          A2ADense,
		"C > F1:A2A* > D > C > F2:AG* > D": Partitioned,
	}[flat]
	if !ok {
		return "", fmt.Errorf("path %q (flat: %q) has no collective in compressor sync", path, flat)
	}
	return coll, nil
}
