package clitest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"trainwire.dev/lib/cli"
)

// EnvRule checks the environment-variable rule (lib/cli's EnvRule,
// docs/launch.md) on every flag of a tool as the tool builds its parser:
//
//   - every flag has a variable (the launch flags, envscope:"detect": the
//     ones launch.Detect reads, named in their help);
//   - a tool's own flag reads TRAINWIRE_<TOOL>_<FLAG> or
//     TRAINWIRE_<TOOL>_<VERB>_<FLAG> first, and any other name it reads is
//     one of cli.LegacyEnv's;
//   - no rule's name is read by two flags that are not the same flag
//     (help, type, default and choices), so a variable set for one verb
//     never changes another (legacy names may be: they are kept as they
//     were);
//   - every verb's --help shows each of its flags' first variable.
func EnvRule(t *testing.T, tool string, cliStruct any, run RunFunc) {
	t.Helper()
	k, err := cli.NewParser(cli.Tool{Name: tool}, cliStruct, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]*kong.Flag{} // variable → the first flag reading it
	byVerb := map[string][]string{}  // verb → the variables its help must show
	walk(k.Model.Node, "", func(verb string, f *kong.Flag, detected bool) {
		name := verb + " --" + f.Name
		if detected {
			return
		}
		if len(f.Envs) == 0 {
			t.Errorf("%s %s: no environment variable", tool, name)
			return
		}
		first := f.Envs[0]
		own := cli.EnvName(tool, f.Name)
		if verb != "" && first != own && first != cli.EnvName(tool, verb, f.Name) && f.Tag.Get(cli.EnvScope) != "shared" {
			t.Errorf("%s %s: reads %s first, want %s (or with the verb)", tool, name, first, own)
		}
		for _, e := range f.Envs[1:] {
			if !cli.LegacyEnv[e] {
				t.Errorf("%s %s: also reads %s, which breaks the rule and is not a legacy name (cli.LegacyEnv)", tool, name, e)
			}
		}
		if o := owner[first]; o != nil && cli.FlagIdentity(o) != cli.FlagIdentity(f) {
			t.Errorf("%s: %s is read by two different flags --%s (%q) and %s (%q)", tool, first, o.Name, o.Help, name, f.Help)
		} else if o == nil {
			owner[first] = f
		}
		byVerb[verb] = append(byVerb[verb], first)
	})
	for verb, envs := range byVerb {
		var out, errb bytes.Buffer
		args := append(strings.Fields(verb), "--help")
		if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Errorf("%s %s --help: exit %d", tool, verb, code)
			continue
		}
		help := strings.Join(strings.Fields(out.String()), " ")
		for _, e := range envs {
			if !strings.Contains(help, "$"+e) {
				t.Errorf("%s %s --help does not show $%s", tool, verb, e)
			}
		}
	}
}

// walk calls fn for every flag of n and its verbs, with the verb's path
// and whether launch.Detect reads it (no kong variable).
func walk(n *kong.Node, verb string, fn func(verb string, f *kong.Flag, detected bool)) {
	for _, f := range n.Flags {
		if f.Name == "help" || f.Name == "version" {
			continue
		}
		fn(verb, f, f.Tag.Get(cli.EnvScope) == "detect")
	}
	for _, c := range n.Children {
		v := c.Name
		if verb != "" {
			v = verb + " " + c.Name
		}
		walk(c, v, fn)
	}
}
