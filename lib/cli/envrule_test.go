package cli

import (
	"io"
	"testing"
)

// ruleCLI has two verbs with an --out each that are different flags, one
// shared --level, and a flag with a legacy name.
type ruleCLI struct {
	Globals
	A struct {
		Out   string `help:"A's output."`
		Level int    `help:"Level."`
	} `cmd:""`
	B struct {
		Out   string `help:"B's output."`
		Level int    `help:"Level."`
		Seed  int    `help:"Seed." env:"TRAINWIRE_SEED"`
	} `cmd:""`
}

// TestEnvRuleReads: the rule's variables set the flags — per verb where
// two verbs' flags of one name differ, per tool where they are the same
// flag — and a legacy name still works, after the rule's.
func TestEnvRuleReads(t *testing.T) {
	t.Setenv("TRAINWIRE_ET_A_OUT", "a.tw")
	t.Setenv("TRAINWIRE_ET_B_OUT", "b.tw")
	t.Setenv("TRAINWIRE_ET_LEVEL", "3")
	t.Setenv("TRAINWIRE_SEED", "7")
	var c ruleCLI
	k, err := NewParser(Tool{Name: "et"}, &c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	if c.A.Out != "a.tw" || c.A.Level != 3 {
		t.Errorf("a: --out %q --level %d, want a.tw and 3", c.A.Out, c.A.Level)
	}
	if _, err := k.Parse([]string{"b"}); err != nil {
		t.Fatal(err)
	}
	if c.B.Out != "b.tw" || c.B.Level != 3 || c.B.Seed != 7 {
		t.Errorf("b: --out %q --level %d --seed %d, want b.tw, 3 and 7", c.B.Out, c.B.Level, c.B.Seed)
	}
	t.Setenv("TRAINWIRE_ET_SEED", "9")
	if _, err := k.Parse([]string{"b"}); err != nil {
		t.Fatal(err)
	}
	if c.B.Seed != 9 {
		t.Errorf("b --seed %d: the rule's TRAINWIRE_ET_SEED=9 must win over the legacy TRAINWIRE_SEED=7", c.B.Seed)
	}
}
