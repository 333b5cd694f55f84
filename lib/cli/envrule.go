package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// The environment-variable rule (docs/launch.md, "Environment
// variables"): every flag can be set from the environment, by one name
// derived from the flag:
//
//   - a flag every tool shares (the log flags, the stream limits, the
//     mesh's, serve's, a networked verb's --rank/--world/…) keeps its
//     shared name, TRAINWIRE_[GROUP_]FLAG: TRAINWIRE_LOG_LEVEL,
//     TRAINWIRE_MAX_PAYLOAD, TRAINWIRE_TOKEN, TRAINWIRE_SERVE_SOCKET,
//     TRAINWIRE_RANK (the launch flags are read by launch.Detect, which
//     programs without kong use too, so kong binds none of them);
//   - a tool's own flag is TRAINWIRE_<TOOL>_<FLAG> (TRAINWIRE_COMPRESSOR_ALGO);
//   - where two verbs of a tool have flags of the same name that are not
//     the same flag (other help, type, default or choices), each is
//     TRAINWIRE_<TOOL>_<VERB>_<FLAG> (TRAINWIRE_PROFILER_PLOT_OUT), so
//     that a variable a script sets for one verb never changes another.
//
// FLAG is the long flag name upper-cased with - as _; VERB is the verb's
// path, sub-verbs joined by _. Names a flag had before the rule
// (LegacyEnv) keep working after the rule's name, which wins when both
// are set.

// EnvPrefix starts every environment variable the tools read.
const EnvPrefix = "TRAINWIRE_"

// EnvScope is the struct tag that marks a flag of a group every tool
// embeds: envscope:"shared" keeps the names of its env tag in every tool
// (TRAINWIRE_[GROUP_]FLAG, no tool in them); envscope:"detect" is a
// launch flag, which launch.Detect reads from TRAINWIRE_<FLAG> (the
// master from TRAINWIRE_MASTER_ADDR and _PORT), so kong binds none.
const EnvScope = "envscope"

// shared returns a shared flag's names and whether launch.Detect reads
// them; ok is false for a tool's own flag.
func shared(f *kong.Flag) (envs []string, detect, ok bool) {
	switch f.Tag.Get(EnvScope) {
	case "shared":
		return slices.Clone(f.Envs), false, true
	case "detect":
		if f.Name == "master" {
			return []string{EnvPrefix + "MASTER_ADDR", EnvPrefix + "MASTER_PORT"}, true, true
		}
		return []string{EnvName(f.Name)}, true, true
	}
	return nil, false, false
}

// EnvName is TRAINWIRE_ followed by the parts upper-cased, - and space
// as _: EnvName("compressor", "max-payload") = TRAINWIRE_COMPRESSOR_MAX_PAYLOAD.
func EnvName(parts ...string) string {
	s := strings.ToUpper(strings.Join(parts, "_"))
	return EnvPrefix + strings.NewReplacer("-", "_", " ", "_", ".", "_").Replace(s)
}

// FlagEnv is the rule's answer for one flag of a tool.
type FlagEnv struct {
	Flag *kong.Flag
	// Verb is the path of the verb the flag belongs to ("" at the top).
	Verb string
	// Env is the rule's names: one, or TRAINWIRE_MASTER_ADDR and _PORT.
	Env []string
	// Shared: a flag every tool shares; Detected: read by launch.Detect
	// rather than bound by kong.
	Shared, Detected bool
}

// EnvRule applies the rule to every flag of a tool's kong model, from
// the root: the flag reads the rule's name first, then the names its tag
// gave it. It returns each flag's answer.
func EnvRule(tool string, root *kong.Node) []FlagEnv {
	var all []FlagEnv
	walkFlags(root, func(n *kong.Node, f *kong.Flag) {
		fe := FlagEnv{Flag: f, Verb: verbPath(n)}
		if envs, detect, ok := shared(f); ok {
			fe.Env, fe.Shared, fe.Detected = envs, true, detect
		}
		all = append(all, fe)
	})
	scopeToolFlags(tool, all)
	for _, fe := range all {
		if fe.Detected {
			continue
		}
		var envs []string
		for _, e := range append(slices.Clone(fe.Env), fe.Flag.Envs...) {
			if !slices.Contains(envs, e) {
				envs = append(envs, e)
			}
		}
		fe.Flag.Envs = envs
		fe.Flag.Value.Tag.Envs = envs
	}
	return all
}

// scopeToolFlags names each tool flag of all: TRAINWIRE_<TOOL>_<FLAG>,
// or with the verb where the tool has different flags of that name.
func scopeToolFlags(tool string, all []FlagEnv) {
	kinds := map[string]map[string]bool{} // flag name → its different definitions
	for _, fe := range all {
		if fe.Shared {
			continue
		}
		if kinds[fe.Flag.Name] == nil {
			kinds[fe.Flag.Name] = map[string]bool{}
		}
		kinds[fe.Flag.Name][FlagIdentity(fe.Flag)] = true
	}
	for i := range all {
		fe := &all[i]
		if fe.Shared {
			continue
		}
		if len(kinds[fe.Flag.Name]) > 1 && fe.Verb != "" {
			fe.Env = []string{EnvName(tool, fe.Verb, fe.Flag.Name)}
		} else {
			fe.Env = []string{EnvName(tool, fe.Flag.Name)}
		}
	}
}

// FlagIdentity tells flags apart: two flags of one name are the same flag
// when their help, type, default and choices are.
func FlagIdentity(f *kong.Flag) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s", f.Help, f.Target.Type(), f.Default, f.Enum)
}

// verbPath is n's path below the tool: "" for the tool itself, else its
// verbs joined by spaces ("catalog rebuild").
func verbPath(n *kong.Node) string {
	var parts []string
	for ; n != nil && n.Parent != nil; n = n.Parent {
		parts = append([]string{n.Name}, parts...)
	}
	return strings.Join(parts, " ")
}

// walkFlags calls fn for every flag of n and its verbs (help and
// --version left out: they are no settings).
func walkFlags(n *kong.Node, fn func(*kong.Node, *kong.Flag)) {
	for _, f := range n.Flags {
		if f.Name == "help" || f.Name == "version" {
			continue
		}
		fn(n, f)
	}
	for _, c := range n.Children {
		walkFlags(c, fn)
	}
}

// LegacyEnv are the names flags read before the rule, which scripts may
// still set: each flag reads its rule's name first, then these. No name
// joins this list: a new flag takes the rule's.
var LegacyEnv = map[string]bool{
	"TRAINWIRE_AVERAGE":                     true,
	"TRAINWIRE_BLOCK":                       true,
	"TRAINWIRE_CKPT_BUFFER":                 true,
	"TRAINWIRE_CKPT_ETCD":                   true,
	"TRAINWIRE_CKPT_FORMAT":                 true,
	"TRAINWIRE_CKPT_METRICS":                true,
	"TRAINWIRE_CKPT_PARTS":                  true,
	"TRAINWIRE_CKPT_PEERS":                  true,
	"TRAINWIRE_CKPT_PERSISTENT":             true,
	"TRAINWIRE_CKPT_PERSIST_RATE":           true,
	"TRAINWIRE_CKPT_REPLICAS":               true,
	"TRAINWIRE_CLUSTER":                     true,
	"TRAINWIRE_COMM_ALPHA_US":               true,
	"TRAINWIRE_COMM_GBPS":                   true,
	"TRAINWIRE_COMM_SAMPLES":                true,
	"TRAINWIRE_COMPRESSOR_ALGO":             true,
	"TRAINWIRE_COMPRESSOR_AVERAGE":          true,
	"TRAINWIRE_COMPRESSOR_CLIP":             true,
	"TRAINWIRE_COMPRESSOR_DGC_CLIP":         true,
	"TRAINWIRE_COMPRESSOR_DGC_WARMUP":       true,
	"TRAINWIRE_COMPRESSOR_EF_LR":            true,
	"TRAINWIRE_COMPRESSOR_MEMORY":           true,
	"TRAINWIRE_COMPRESSOR_STATE_IN":         true,
	"TRAINWIRE_COMPRESSOR_STATE_OUT":        true,
	"TRAINWIRE_COMP_ALGO":                   true,
	"TRAINWIRE_COMP_ALPHA_US":               true,
	"TRAINWIRE_COMP_GBPS":                   true,
	"TRAINWIRE_COMP_SAMPLES":                true,
	"TRAINWIRE_CPU_DECODE":                  true,
	"TRAINWIRE_CPU_ENCODE":                  true,
	"TRAINWIRE_CPU_PROFILE":                 true,
	"TRAINWIRE_FORMAT":                      true,
	"TRAINWIRE_GPU_DECODE":                  true,
	"TRAINWIRE_GPU_ENCODE":                  true,
	"TRAINWIRE_HASH_K":                      true,
	"TRAINWIRE_HITOPK_LOCAL":                true,
	"TRAINWIRE_MAX_MESSAGE":                 true,
	"TRAINWIRE_MODEL":                       true,
	"TRAINWIRE_OUTPUT":                      true,
	"TRAINWIRE_PARTITIONER":                 true,
	"TRAINWIRE_PROFILER_CLASS":              true,
	"TRAINWIRE_PROFILER_FORMAT":             true,
	"TRAINWIRE_PROFILER_MODEL_NAME":         true,
	"TRAINWIRE_PROFILER_NO_DEFAULT_CLASSES": true,
	"TRAINWIRE_PROFILER_OUT":                true,
	"TRAINWIRE_PROFILER_RANK":               true,
	"TRAINWIRE_PROFILE_ITERS":               true,
	"TRAINWIRE_PULL":                        true,
	"TRAINWIRE_R1_FACTOR":                   true,
	"TRAINWIRE_R2_FRACTION":                 true,
	"TRAINWIRE_RANK":                        true,
	"TRAINWIRE_RHO":                         true,
	"TRAINWIRE_ROW_WIDTH":                   true,
	"TRAINWIRE_SCHEME":                      true,
	"TRAINWIRE_SEED":                        true,
	"TRAINWIRE_STATS":                       true,
	"TRAINWIRE_STRAGGLE_DIM":                true,
	"TRAINWIRE_STRAGGLE_MODE":               true,
	"TRAINWIRE_STRAGGLE_PROBES":             true,
	"TRAINWIRE_STRAGGLE_ROUNDS":             true,
	"TRAINWIRE_STRAGGLE_SEED":               true,
	"TRAINWIRE_TIMEOUT":                     true,
	"TRAINWIRE_TOKEN":                       true,
	"TRAINWIRE_WORKERS":                     true,
	"TRAINWIRE_WORLD":                       true,
}
