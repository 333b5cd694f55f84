package main

import (
	"fmt"
	"io"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// EncodeCmd compresses dense f32 frames with error feedback.
type EncodeCmd struct {
	cli.WireFlags
	CodecFlags
	DeviceFlags
	Algo     string   `help:"Algorithm (see compressor list)." required:"" env:"TRAINWIRE_COMPRESSOR_ALGO"`
	Memory   string   `help:"Error feedback: none, residual, dgc, efsignsgd or powersgd." enum:"none,residual,dgc,efsignsgd,powersgd" default:"none" env:"TRAINWIRE_COMPRESSOR_MEMORY"`
	Beta     float64  `help:"residual: p = β·e + γ·g, β." default:"1"`
	Gamma    float64  `help:"residual: p = β·e + γ·g, γ." default:"1"`
	DGCMom   float64  `name:"dgc-momentum" help:"dgc memory: momentum m of u = m·u + g." default:"0.9"`
	LR       float64  `help:"efsignsgd memory: p = e + lr·g." default:"1"`
	EFLR     float64  `name:"ef-lr" help:"Learning-rate-rescaled error feedback (BytePS): the current learning rate; a residual kept at rate lr' enters as lr'/lr·e (rate kept in state slot lr). residual, efsignsgd and powersgd memories, CPU only; 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_EF_LR"`
	DGCClip  float64  `name:"dgc-clip" help:"dgc memory: clip each gradient to this L2 norm before the momentum (DGC's local clipping; pass the global norm / sqrt(world)). CPU only; 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_DGC_CLIP"`
	Point    string   `help:"Compression point: keep the error-feedback state per tensor AND point (state frames TENSOR#POINT@SLOT), e.g. rs and ag of a two-stage scheme. CPU only." env:"TRAINWIRE_COMPRESSOR_POINT"`
	Parts    int      `help:"Partitioned compression for Alltoall: cut each tensor into P chunks of ceil(d/P) elements (the last zero-padded) and compress each as a tensor of its own, named NAME[c/P], with chunk-local indices, its own error-feedback state and equal payloads; decode --join puts them back together. 0 or 1: whole tensors." default:"0" env:"TRAINWIRE_COMPRESSOR_PARTS"`
	StateIn  string   `help:"Read the error-feedback state (a stream written by --state-out) before encoding." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_IN"`
	StateOut string   `help:"Write the error-feedback state as a stream (dense frames named TENSOR@SLOT) after encoding." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_OUT"`
	Out      string   `short:"o" help:"Output stream; - is stdout. A file appears only complete, once every frame is encoded (a failed or killed run leaves none)." default:"-" type:"path" env:"TRAINWIRE_COMPRESSOR_OUT"`
	Files    []string `arg:"" optional:"" help:"Input streams; - or none for stdin." type:"path"`
}

// Run compresses every dense frame of the input as soon as it is read;
// other frames (step ends included) pass through.
func (c *EncodeCmd) Run(rio *cli.IO) error {
	if c.Parts < 0 || c.Parts > codec.MaxParts {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("encode: --parts %d: want 0 to %d", c.Parts, codec.MaxParts))
	}
	enc, err := c.newEncoder(rio)
	if err != nil {
		return err
	}
	defer enc.Close()
	if err := c.applyMemoryOptions(enc); err != nil {
		return err
	}
	if c.StateIn != "" {
		if err := c.readState(rio, enc); err != nil {
			return err
		}
	}
	out, err := cli.CreateOutput(c.Out, rio.Stdout)
	if err != nil {
		return err
	}
	defer out.Close()
	w := wire.NewWriter(out, rio.Tool+"/"+cli.Version)
	w.SetMeta(map[string]string{"algo": c.Algo, "memory": c.Memory})
	var in, bytesOut int64
	bar := rio.Progress("encode", cli.InputSize(c.Files), true)
	filter := cli.StepFilter{Out: w, Frame: func(f wire.Frame) error {
		n, m, err := c.encodeFrame(enc, w, f)
		in, bytesOut = in+n, bytesOut+m
		bar.Add(n)
		return err
	}}
	err = filter.Run(c.Files, rio.Stdin, c.Limits())
	bar.Done()
	if err := cli.EndStream(w, err); err != nil {
		return err
	}
	if err := out.Commit(); err != nil {
		return err
	}
	if in > 0 {
		rio.Log.Info("encoded", "algo", c.Algo, "memory", c.Memory, "device", c.Device, "frames", w.Count(), "bytes_in", in, "bytes_out", bytesOut, "ratio", float64(bytesOut)/float64(in))
	}
	if c.StateOut != "" {
		st, err := enc.Store()
		if err != nil {
			return err
		}
		return writeFileAtomic(c.StateOut, func(f io.Writer) error {
			sw := wire.NewWriter(f, rio.Tool+"/"+cli.Version)
			sw.SetMeta(map[string]string{"kind": "compressor-state", "algo": c.Algo, "memory": c.Memory})
			if err := st.WriteTo(sw); err != nil {
				return err
			}
			return sw.Close()
		})
	}
	return nil
}

// encodeFrame writes f's answer to w: a dense f32 frame compressed (in
// --parts chunks), a sparse one refused, any other frame as it is. It
// returns the bytes of data read and of payload written.
func (c *EncodeCmd) encodeFrame(enc frameEncoder, w *wire.Writer, f wire.Frame) (in, out int64, err error) {
	var d *wire.Dense
	switch f := f.(type) {
	case *wire.Dense:
		d = f
	case *wire.Sparse:
		return 0, 0, cli.WithCode(cli.ExitBadInput, fmt.Errorf(
			"encode: tensor %q (step %d) is a sparse frame (%d rows): compressor encode compresses dense f32 tensors; sparse gradients are synchronised by hashsync sync",
			f.Name, f.Step, f.Nnz))
	default:
		return 0, 0, w.Write(f)
	}
	if d.DType != wire.F32 {
		return 0, 0, cli.WithCode(cli.ExitBadInput, fmt.Errorf("encode: tensor %q is %s, want f32", d.Name, d.DType))
	}
	x, err := d.F32()
	if err != nil {
		return 0, 0, cli.WithCode(cli.ExitBadInput, err)
	}
	whole := codec.Input{Name: d.Name, Step: d.Step, Rank: d.Rank, Shape: d.Shape, Data: x}
	ins := []codec.Input{whole}
	if c.Parts > 1 {
		if ins, err = codec.Split(whole, c.Parts); err != nil {
			return 0, 0, cli.WithCode(cli.ExitBadInput, err)
		}
	}
	in = int64(len(d.Data))
	for k, ci := range ins {
		cf, err := enc.Encode(ci)
		if err != nil {
			return in, out, err
		}
		if c.Parts > 1 {
			codec.MarkPart(cf, k, c.Parts, d.Shape)
		}
		for _, p := range cf.Parts {
			out += int64(len(p.Data))
		}
		if err := w.Write(cf); err != nil {
			return in, out, err
		}
	}
	return in, out, nil
}

// applyMemoryOptions sets --ef-lr and --point on a CPU encoder (the GPU
// keeps neither).
func (c *EncodeCmd) applyMemoryOptions(enc frameEncoder) error {
	if c.EFLR == 0 && c.DGCClip == 0 && c.Point == "" {
		return nil
	}
	ce, ok := enc.(*cpuEncoder)
	if !ok {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("encode: --ef-lr, --dgc-clip and --point are not kept on the GPU (use --device cpu)"))
	}
	if strings.Contains(c.Point, codec.StateSep) {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("encode: --point %q contains %q", c.Point, codec.StateSep))
	}
	if c.EFLR != 0 || c.DGCClip != 0 {
		mem, err := codec.NewMemory(c.Memory, codec.MemoryOptions{Beta: c.Beta, Gamma: c.Gamma, Momentum: c.DGCMom, LR: c.LR,
			RescaleLR: c.EFLR, ClipNorm: c.DGCClip})
		if err != nil {
			return cli.WithCode(cli.ExitUsage, err)
		}
		ce.enc.Memory = mem
	}
	ce.enc.Point = c.Point
	return nil
}

func (c *EncodeCmd) readState(rio *cli.IO, enc frameEncoder) error {
	f, closeF, err := cli.OpenInput(c.StateIn, rio.Stdin)
	if err != nil {
		return err
	}
	defer closeF()
	st, err := codec.ReadStore(wire.NewReader(f, c.Limits()))
	if err != nil {
		return fmt.Errorf("--state-in %s: %w", c.StateIn, err)
	}
	enc.SetStore(st)
	rio.Log.Debug("state read", "tensors", st.Len())
	return nil
}
