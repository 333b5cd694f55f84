package codec

import "bytes"

type bytesBuffer = bytes.Buffer

var goldenRandomIndices = []uint32{1, 13, 14, 40, 65}
