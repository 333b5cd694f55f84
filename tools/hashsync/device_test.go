package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/gpu"
)

// TestDeviceRefusals: --device gpu where it cannot work is a usage error
// (exit 80) that says why, before any rank connects.
func TestDeviceRefusals(t *testing.T) {
	base := []string{"sync", "--rank", "0", "--world", "1", "--master", "127.0.0.1:1"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--device", "gpu0"}, `--device "gpu0": want cpu, gpu or gpu:N`},
		{[]string{"--device", "gpu", "--scheme", "dense"}, "scheme dense does not hash"},
		{[]string{"--device", "gpu:1", "--scheme", "sparcml"}, "scheme sparcml does not hash"},
		{[]string{"--device", "gpu", "--partitioner", "bucket"}, "--partitioner bucket runs on the CPU"},
	}
	if d, err := gpu.Open(0); errors.Is(err, gpu.ErrNoCUDA) {
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"--device", "gpu"}, "built without CUDA support"})
	} else if d != nil {
		d.Close()
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(append(base, c.args...), strings.NewReader(""), &out, &errb)
		if code != cli.ExitUsage || !strings.Contains(errb.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want exit %d saying %q", c.args, code, out.Len(), errb.String(), cli.ExitUsage, c.want)
		}
	}
}
