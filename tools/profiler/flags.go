package main

import (
	"fmt"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/trace"
)

// TraceFlags say which traces to read and how to classify their events;
// every verb that reads traces has them.
type TraceFlags struct {
	Files            []string     `arg:"" help:"Trace files or directories of them (.json, .json.gz; a directory is searched for both); - is stdin." type:"path"`
	Rank             int64        `help:"Rank of a single trace file, overriding distributedInfo and the file name (-1: from the file)." default:"-1" env:"TRAINWIRE_PROFILER_RANK"`
	Class            []string     `help:"Extra classification rule CLASS=REGEX on the event name, or CLASS=cat:REGEX on the category; tried before the defaults, first match wins. Classes: compute, comm, memory, sync, runtime, annotation, other." placeholder:"CLASS=REGEX" sep:"none" env:"TRAINWIRE_PROFILER_CLASS"`
	Classes          string       `help:"JSON file of rules [{\"class\":..., \"name\":..., \"cat\":...}], tried before the defaults." type:"existingfile" env:"TRAINWIRE_PROFILER_CLASSES"`
	NoDefaultClasses bool         `help:"Use only the rules given with --class/--classes." env:"TRAINWIRE_PROFILER_NO_DEFAULT_CLASSES"`
	MaxToken         cli.ByteSize `help:"Largest single JSON string or number accepted." default:"64MiB" env:"TRAINWIRE_PROFILER_MAX_TOKEN"`
	Workers          int          `help:"Parse each file's events on N goroutines fed by a splitter (0 or 1: on one, the default; the pipeline costs a third more CPU, so it only pays with idle cores)." default:"1" env:"TRAINWIRE_PROFILER_WORKERS"`
}

// classifier builds the classifier the flags ask for.
func (f *TraceFlags) classifier() (*classify.Classifier, error) {
	var rules []classify.Rule
	if f.Classes != "" {
		fh, err := os.Open(f.Classes)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r, err := classify.ReadRules(fh)
		if err != nil {
			return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("%s: %w", f.Classes, err))
		}
		rules = append(rules, r...)
	}
	for _, s := range f.Class {
		r, err := classify.ParseFlag(s)
		if err != nil {
			return nil, cli.WithCode(cli.ExitUsage, err)
		}
		rules = append(rules, r)
	}
	c, err := classify.New(rules, f.NoDefaultClasses)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, err)
	}
	return c, nil
}

// files expands directories.
func (f *TraceFlags) files() ([]string, error) {
	files, err := trace.Expand(f.Files)
	if err != nil {
		return nil, err
	}
	if f.Rank >= 0 && len(files) > 1 {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--rank names the rank of one file; %d files given", len(files)))
	}
	return files, nil
}

// load reads every trace into ranks.
func (f *TraceFlags) load(rio *cli.IO) ([]*analysis.Rank, error) {
	c, err := f.classifier()
	if err != nil {
		return nil, err
	}
	files, err := f.files()
	if err != nil {
		return nil, err
	}
	bar := rio.Progress("read", cli.InputSize(files), true)
	ranks, err := analysis.Load(files, analysis.LoadOptions{Classifier: c, Rank: f.Rank, Stdin: rio.Stdin, MaxToken: int(f.MaxToken), Workers: f.Workers,
		Progress: bar.Add})
	bar.Done()
	if err != nil {
		return nil, err
	}
	for _, r := range ranks {
		if n := sum(r.Skipped); n > 0 {
			rio.Log.Info("skipped events", "rank", r.Rank, "count", n, "reasons", r.Skipped)
		}
		if r.Unterminated {
			rio.Log.Warn("trace array has no closing bracket (Horovod ≤ 0.20 or an interrupted writer); read up to the last complete event", "rank", r.Rank, "files", r.Files)
		}
	}
	return ranks, nil
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
