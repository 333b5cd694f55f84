package costmodel

import (
	"fmt"
	"math"
)

// CodecSample is one `compressor bench` measurement of a codec: encoding
// and decoding a tensor of Bytes f32 bytes took EncodeNS and DecodeNS.
type CodecSample struct {
	Bytes, EncodeNS, DecodeNS float64
}

// CodecTimes is a codec's time model on one device: encode and decode
// times in nanoseconds as functions of the dense f32 bytes (the input of
// encode, the output of decode).
type CodecTimes struct {
	Encode, Decode Cost
}

// EncodeNS is the encode time of b dense bytes, never negative (a fitted
// line may cross zero below its smallest sample).
func (c CodecTimes) EncodeNS(b float64) float64 { return nonNeg(c.Encode.At(b)) }

// DecodeNS is the decode time of b dense bytes, never negative.
func (c CodecTimes) DecodeNS(b float64) float64 { return nonNeg(c.Decode.At(b)) }

func nonNeg(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}

func (c CodecTimes) String() string { return fmt.Sprintf("encode %v, decode %v", c.Encode, c.Decode) }

// FitCodec fits encode and decode models to samples with FitAuto
// (piecewise — a launch cost below a size, linear above — where the data
// says so, as GPU kernels behave; linear otherwise) and returns the worse
// of the two fits' relative RMSE.
func FitCodec(s []CodecSample) (CodecTimes, float64, error) {
	enc := make([]Sample, len(s))
	dec := make([]Sample, len(s))
	for i, p := range s {
		enc[i] = Sample{X: p.Bytes, T: p.EncodeNS}
		dec[i] = Sample{X: p.Bytes, T: p.DecodeNS}
	}
	fe, err := FitAuto(enc)
	if err != nil {
		return CodecTimes{}, 0, fmt.Errorf("encode: %w", err)
	}
	fd, err := FitAuto(dec)
	if err != nil {
		return CodecTimes{}, 0, fmt.Errorf("decode: %w", err)
	}
	return CodecTimes{Encode: fe.Cost, Decode: fd.Cost}, math.Max(fe.RMSE, fd.RMSE), nil
}
