module trainwire.dev/tools/ckpt

go 1.26.0

require (
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/sys v0.49.0
	trainwire.dev/lib v0.0.0
)

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)

replace trainwire.dev/lib => ../../lib
