package verbs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoMeshWithoutCheck: the tools that have no networked verb (fuser,
// profiler) link neither lib/mesh nor lib/collective: dump and env are in
// lib/cli/verbs, check in a package of its own (issue 25 move 5).
func TestNoMeshWithoutCheck(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", "trainwire.dev/tools/fuser", "trainwire.dev/tools/profiler").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "trainwire.dev/lib/mesh" || pkg == "trainwire.dev/lib/collective" {
			t.Errorf("fuser or profiler links %s", pkg)
		}
	}
}
