package trace

import (
	"fmt"
	"io"
	"os"
	"testing"
)

// BenchmarkReader reads $PROFILER_BENCH_TRACE (bench/profiler/gen_trace.py
// writes one), skipping without it.
func BenchmarkReader(b *testing.B) {
	path := os.Getenv("PROFILER_BENCH_TRACE")
	if path == "" {
		b.Skip("PROFILER_BENCH_TRACE not set")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for i := 0; i < b.N; i++ {
		f, _ := os.Open(path)
		tr := NewReader(f, Options{Workers: workersEnv()})
		for {
			_, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

func workersEnv() int {
	n := 0
	fmt.Sscan(os.Getenv("PROFILER_BENCH_WORKERS"), &n)
	return n
}
