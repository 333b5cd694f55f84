package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestPTXFresh: the committed PTX was generated from the committed CUDA C
// (kernels/SOURCES.sha256, written by kernels/gen.sh), for compute_70
// without FMA contraction.
func TestPTXFresh(t *testing.T) {
	sums, err := os.ReadFile("kernels/SOURCES.sha256")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		f := strings.Fields(line)
		b, err := os.ReadFile("kernels/" + f[1])
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		if hex.EncodeToString(s[:]) != f[0] {
			t.Errorf("kernels/%s changed since the PTX was generated: run `go generate ./gpu/` (kernels/gen.sh)", f[1])
		}
		n++
	}
	cus, _ := os.ReadDir("kernels")
	src := 0
	for _, e := range cus {
		if strings.HasSuffix(e.Name(), ".cu") || strings.HasSuffix(e.Name(), ".cuh") {
			src++
		}
	}
	if src != n {
		t.Errorf("%d CUDA sources, %d in SOURCES.sha256: run kernels/gen.sh", src, n)
	}
	for name, p := range PTX() {
		if !strings.Contains(p, ".target sm_70") {
			t.Errorf("%s: not compute_70 PTX", name)
		}
		if strings.Contains(p, "fma.rn.f32") || strings.Contains(p, "fma.rn.f64") {
			t.Errorf("%s: has FMA instructions (generate with -fmad=false)", name)
		}
	}
}

// TestKernelParams: every kernel parameter is 64 bits wide (cu's Launch
// copies 8 bytes per parameter).
func TestKernelParams(t *testing.T) {
	for k, sig := range kernelParams() {
		for i, p := range sig {
			if p != ".u64" && p != ".f64" {
				t.Errorf("%s: parameter %d is %s", k, i, p)
			}
		}
	}
}

// TestKernelsCovered: every kernel in the PTX has an emulator twin and the
// other way round, so the parity tests cover every kernel the host code
// can launch.
func TestKernelsCovered(t *testing.T) {
	ptx := Kernels()
	emu := slices.Sorted(maps.Keys(emuKernels))
	if !slices.Equal(ptx, emu) {
		t.Fatalf("PTX kernels %v\nemulated %v", ptx, emu)
	}
}

// TestMain checks, after a full run, that the tests launched every kernel.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.fuzz").Value.String() == "" {
		var missing []string
		for _, k := range Kernels() {
			if !emuLaunched[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: the tests never launched %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}
