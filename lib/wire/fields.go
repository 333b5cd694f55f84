package wire

import (
	"errors"
	"fmt"
	"math"
)

// The set methods decode one key of a frame; see newFrame.

func (f *Header) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "producer":
		f.Producer, err = d.str()
	case "schema":
		f.Schema, err = d.int()
	case "meta":
		f.Meta, err = d.strMap()
	default:
		return false, nil
	}
	return true, err
}

func (f *End) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "count":
		f.Count, err = d.int()
	case "xxh3":
		f.XXH3, err = d.uint()
	default:
		return false, nil
	}
	return true, err
}

func (f *StepEnd) set(d *dec, k string) (bool, error) {
	if k != "step" {
		return false, nil
	}
	var err error
	f.Step, err = d.int()
	return true, err
}

// tensorID decodes the name/step/rank keys shared by tensor frames.
func tensorID(d *dec, k string, name *string, step, rank *int64) (bool, error) {
	var err error
	switch k {
	case "name":
		*name, err = d.str()
	case "step":
		*step, err = d.int()
	case "rank":
		*rank, err = d.int()
	default:
		return false, nil
	}
	return true, err
}

func (f *Dense) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "dtype":
		f.DType, err = d.dtype()
	case "shape":
		f.Shape, err = d.shape()
	case "data":
		f.Data, err = d.bin()
	default:
		return tensorID(d, k, &f.Name, &f.Step, &f.Rank)
	}
	return true, err
}

func (f *Sparse) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "dtype":
		f.DType, err = d.dtype()
	case "shape":
		f.Shape, err = d.shape()
	case "width":
		f.Width, err = d.int()
	case "format":
		f.Format, err = d.str()
	case "itype":
		f.IType, err = d.dtype()
	case "nnz":
		f.Nnz, err = d.int()
	case "indices":
		f.Indices, err = d.bin()
	case "values":
		f.Values, err = d.bin()
	default:
		return tensorID(d, k, &f.Name, &f.Step, &f.Rank)
	}
	return true, err
}

func (f *Compressed) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "algo":
		f.Algo, err = d.str()
	case "params":
		f.Params, err = d.anyMap(0)
	case "dtype":
		f.DType, err = d.dtype()
	case "shape":
		f.Shape, err = d.shape()
	case "parts":
		f.Parts, err = decodeList(d, decodePart)
	default:
		return tensorID(d, k, &f.Name, &f.Step, &f.Rank)
	}
	return true, err
}

// decodeList decodes an array whose elements are maps, each with item.
func decodeList[T any](d *dec, item func(d *dec, k string, v *T) (bool, error)) ([]T, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		m, err := d.mapLen()
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		for range m {
			k, err := d.str()
			if err != nil {
				return nil, fmt.Errorf("[%d]: key: %w", i, err)
			}
			known, err := item(d, k, &out[i])
			if err == nil && !known {
				err = d.skip()
			}
			if err != nil {
				return nil, fmt.Errorf("[%d].%s: %w", i, k, err)
			}
		}
	}
	return out, nil
}

func decodePart(d *dec, k string, p *Part) (bool, error) {
	var err error
	switch k {
	case "name":
		p.Name, err = d.str()
	case "dtype":
		p.DType, err = d.dtype()
	case "shape":
		p.Shape, err = d.shape()
	case "data":
		p.Data, err = d.bin()
	default:
		return false, nil
	}
	return true, err
}

func (f *Event) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "rank":
		f.Rank, err = d.int()
	case "pid":
		f.PID, err = d.int()
	case "tid":
		f.TID, err = d.int()
	case "stream":
		f.Stream, err = d.int()
	case "ts":
		f.TS, err = d.int()
	case "dur":
		f.Dur, err = d.int()
	case "corr":
		f.Corr, err = d.int()
	case "name":
		f.Name, err = d.str()
	case "cat":
		f.Cat, err = d.str()
	case "ph":
		f.Ph, err = d.str()
	case "args":
		f.Args, err = d.anyMap(0)
	default:
		return false, nil
	}
	return true, err
}

func (f *Model) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "world":
		f.World, err = d.int()
	case "iters":
		f.Iters, err = d.int()
	case "iter_ns":
		f.IterNS, err = d.int()
	case "forward_ns":
		f.ForwardNS, err = d.int()
	case "backward_ns":
		f.BackwardNS, err = d.int()
	case "name":
		f.Name, err = d.str()
	case "grads":
		f.Grads, err = decodeList(d, decodeGrad)
	case "comm":
		f.Comm, err = decodeList(d, decodeComm)
	case "meta":
		f.Meta, err = d.anyMap(0)
	default:
		return false, nil
	}
	return true, err
}

func decodeGrad(d *dec, k string, g *Grad) (bool, error) {
	var err error
	switch k {
	case "name":
		g.Name, err = d.str()
	case "bytes":
		g.Bytes, err = d.int()
	case "numel":
		g.Numel, err = d.int()
	case "dtype":
		g.DType, err = d.dtype()
	case "ready_ns":
		g.ReadyNS, err = d.int()
	case "compute_ns":
		g.ComputeNS, err = d.int()
	default:
		return false, nil
	}
	return true, err
}

func decodeComm(d *dec, k string, c *CommSample) (bool, error) {
	var err error
	switch k {
	case "op":
		c.Op, err = d.str()
	case "bytes":
		c.Bytes, err = d.int()
	case "ns":
		c.NS, err = d.int()
	case "world":
		c.World, err = d.int()
	default:
		return false, nil
	}
	return true, err
}

func (f *Plan) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "kind":
		f.Kind, err = d.str()
	case "algo":
		f.Algo, err = d.str()
	case "groups":
		f.Groups, err = decodeGroups(d)
	case "items":
		var n int
		if n, err = d.arrayLen(); err == nil {
			f.Items = make([]map[string]any, n)
			for i := range f.Items {
				if f.Items[i], err = d.anyMap(0); err != nil {
					err = fmt.Errorf("[%d]: %w", i, err)
					break
				}
			}
		}
	case "predicted_ns":
		f.PredictedNS, err = d.int()
	case "proven_optimal":
		f.ProvenOptimal, err = d.bool()
	case "meta":
		f.Meta, err = d.anyMap(0)
	default:
		return false, nil
	}
	return true, err
}

func decodeGroups(d *dec) ([][2]int64, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	g := make([][2]int64, n)
	for i := range g {
		m, err := d.arrayLen()
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if m != 2 {
			return nil, fmt.Errorf("[%d]: %d elements, want [first, last]", i, m)
		}
		for j := range 2 {
			if g[i][j], err = d.int(); err != nil {
				return nil, fmt.Errorf("[%d][%d]: %w", i, j, err)
			}
		}
	}
	return g, nil
}

func (f *Chunk) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "iter":
		f.Iter, err = d.int()
	case "src_rank":
		f.SrcRank, err = d.int()
	case "replica_of":
		f.ReplicaOf, err = d.int()
	case "offset":
		f.Offset, err = d.int()
	case "len":
		f.Len, err = d.int()
	case "total_len":
		f.TotalLen, err = d.int()
	case "job":
		f.Job, err = d.str()
	case "crc32c":
		var c uint64
		c, err = d.uint()
		if err == nil && c > math.MaxUint32 {
			err = errors.New("CRC32C exceeds 32 bits")
		}
		f.CRC32C = uint32(c)
	case "data":
		f.Data, err = d.bin()
	default:
		return false, nil
	}
	return true, err
}

func (f *Stats) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "tool":
		f.Tool, err = d.str()
	case "name":
		f.Name, err = d.str()
	case "step":
		f.Step, err = d.int()
	case "rank":
		f.Rank, err = d.int()
	case "values":
		f.Values, err = d.floatMap()
	case "labels":
		f.Labels, err = d.strMap()
	default:
		return false, nil
	}
	return true, err
}

func (f *Error) set(d *dec, k string) (bool, error) {
	var err error
	switch k {
	case "code":
		f.Code, err = d.str()
	case "msg":
		f.Msg, err = d.str()
	case "rank":
		f.Rank, err = d.int()
	case "frame":
		f.Frame, err = d.int()
	default:
		return false, nil
	}
	return true, err
}
