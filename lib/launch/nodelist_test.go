package launch

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/nodelist/expanded.golden")

func TestExpandNodelist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node01", []string{"node01"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"a[1-2]b[3-4]", []string{"a1b3", "a1b4", "a2b3", "a2b4"}},
		{"gpu-[1-3],cpu1", []string{"gpu-1", "gpu-2", "gpu-3", "cpu1"}},
		{"node[9-11]", []string{"node9", "node10", "node11"}},
		{"node[09-11]", []string{"node09", "node10", "node11"}},
		{"n[3,1,1]", []string{"n3", "n1", "n1"}},
		{"c[1-2]-ib,login", []string{"c1-ib", "c2-ib", "login"}},
		{"[7-8]", []string{"7", "8"}},
	}
	for _, tt := range tests {
		got, err := ExpandNodelist(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
		first, err := firstHost(tt.in)
		require.NoError(t, err)
		assert.Equal(t, tt.want[0], first, tt.in)
	}
}

func TestExpandNodelistErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		msg    string
	}{
		{"", 0, "empty"},
		{"node[01-02", 4, "unclosed '['"},
		{"node[1-", 4, "unclosed '['"},
		{"node01-02]", 9, "']' without '['"},
		{"node[]", 5, "expected a number"},
		{"node[a-b]", 5, "expected a number"},
		{"node[2-1]", 7, "goes down"},
		{"node[1[2]]", 6, `unexpected '['`},
		{"a,,b", 2, "empty host name"},
		{"a,", 2, "empty host name"},
		{"a b", 1, "unexpected byte"},
		{"n[1234567890123456789]", 2, "longer than 18 digits"},
		{strings.Repeat("[1]", maxBrackets+1), 3 * maxBrackets, "bracket groups"},
		{strings.Repeat("a", MaxNodelistInput+1), MaxNodelistInput, "longer than"},
	}
	for _, tt := range tests {
		_, err := ExpandNodelist(tt.in)
		var se *SyntaxError
		require.ErrorAs(t, err, &se, "%q", tt.in)
		assert.Equal(t, tt.offset, se.Offset, "%q: %v", tt.in, err)
		assert.Contains(t, se.Msg, tt.msg, tt.in)
		assert.True(t, strings.HasPrefix(err.Error(), "launch: nodelist "), err.Error())
		assert.Contains(t, err.Error(), fmt.Sprintf("byte %d", tt.offset))
	}
}

func TestExpandNodelistLimits(t *testing.T) {
	for _, in := range []string{
		"n[0-1048576]",                         // one past the host limit
		"n[0-99999999999999999]",               // a huge range
		"n[0-999][0-999][0-999][0-999][0-999]", // a huge product
		"a[0-1048575],b",                       // the sum of expressions
	} {
		_, err := ExpandNodelist(in)
		assert.ErrorIs(t, err, ErrTooLarge, in)
	}
	long := strings.Repeat("x", 100) + "[0-999999]" // 1e6 hosts of 106 bytes: past the byte limit
	_, err := ExpandNodelist(long)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "bytes")

	hosts, err := ExpandNodelist("n[0-1048575]") // exactly the limit
	require.NoError(t, err)
	assert.Len(t, hosts, MaxNodelistHosts)
	assert.Equal(t, "n1048575", hosts[len(hosts)-1])
}

func TestExpandTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"4", []int{4}},
		{"4(x2),8", []int{4, 4, 8}},
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"1,2,3", []int{1, 2, 3}},
		{"16(x1)", []int{16}},
	}
	for _, tt := range tests {
		got, err := ExpandTasksPerNode(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	errs := []struct {
		in     string
		offset int
		msg    string
	}{
		{"", 0, "expected a task count"},
		{"4(2)", 2, `expected "(x"`},
		{"4(x2", 4, "expected ')'"},
		{"4(x)", 3, "expected a repeat count"},
		{"0", 0, "at least 1"},
		{"4(x0)", 3, "at least 1"},
		{"4,", 2, "expected a task count"},
		{"4;5", 1, "unexpected ';'"},
		{"-1", 0, "expected a task count"},
		{"1234567890", 0, "longer than 9 digits"},
	}
	for _, tt := range errs {
		_, err := ExpandTasksPerNode(tt.in)
		var se *SyntaxError
		require.ErrorAs(t, err, &se, "%q", tt.in)
		assert.Equal(t, tt.offset, se.Offset, "%q: %v", tt.in, err)
		assert.Contains(t, se.Msg, tt.msg, tt.in)
		assert.True(t, strings.HasPrefix(err.Error(), "launch: tasks per node "), err.Error())
	}
	_, err := ExpandTasksPerNode("1(x1048576),1")
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = ExpandTasksPerNode("1(x999999999),1(x999999999)")
	assert.ErrorIs(t, err, ErrTooLarge)
}

// TestNodelistGolden expands every line of testdata/nodelist/inputs.txt and
// compares with expanded.golden.
func TestNodelistGolden(t *testing.T) {
	dir := filepath.Join("testdata", "nodelist")
	f, err := os.Open(filepath.Join(dir, "inputs.txt"))
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		in := sc.Text()
		if strings.HasPrefix(in, "#") {
			continue
		}
		fmt.Fprintf(&b, "%q\n", in)
		hosts, err := ExpandNodelist(in)
		switch {
		case errors.Is(err, ErrTooLarge):
			b.WriteString("\ttoo large\n")
		case err != nil:
			fmt.Fprintf(&b, "\terror: %v\n", err)
		default:
			fmt.Fprintf(&b, "\t%s\n", strings.Join(hosts, " "))
		}
	}
	require.NoError(t, sc.Err())
	golden := filepath.Join(dir, "expanded.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String())
}
