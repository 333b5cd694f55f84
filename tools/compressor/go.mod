module trainwire.dev/tools/compressor

go 1.26.0

require trainwire.dev/lib v0.0.0

require github.com/alecthomas/kong v1.17.0 // indirect

replace trainwire.dev/lib => ../../lib
