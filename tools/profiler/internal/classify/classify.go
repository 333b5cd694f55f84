// Package classify sorts trace events into classes (compute, comm, memory,
// sync, runtime, annotation) by ordered, configurable regular expressions.
// The defaults cover every kernel-naming vintage that silently broke
// Holistic Trace Analysis: NCCL's ncclKernel_* → ncclDevKernel_* rename,
// ROCm hip*/rccl names, gloo and MPI collectives, Memcpy/Memset/dma and the
// device synchronization events HTA once counted as compute.
package classify

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unsafe"
)

// Class of an event.
type Class uint8

// Classes.
const (
	Other      Class = iota // instants, metadata, what no rule matches and is not an op
	Compute                 // kernels and CPU ops doing the model's math
	Comm                    // collectives and point-to-point (kernels, gloo/MPI ops, Horovod/BytePS stages)
	Memory                  // memcpy, memset, dma, fusion-buffer copies
	Sync                    // device/stream/event synchronization and waits
	Runtime                 // CUDA/HIP runtime and driver calls (kernel launches)
	Annotation              // user and profiler annotations: steps, forward, optimizer
	NClasses
)

var names = [...]string{"other", "compute", "comm", "memory", "sync", "runtime", "annotation"}

func (c Class) String() string {
	if int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// Parse returns the class named s.
func Parse(s string) (Class, error) {
	for i, n := range names {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("unknown class %q (want one of %s)", s, strings.Join(names[:], ", "))
}

// Rule assigns Class to events whose name matches Name and whose category
// matches Cat (either may be empty: matches everything).
type Rule struct {
	Class string `json:"class"`
	Name  string `json:"name,omitempty"`
	Cat   string `json:"cat,omitempty"`
}

// RuntimeCategories matches the categories of host-side runtime and
// driver calls of every device runtime Kineto records (its ActivityType
// names, old and new): the launches a kernel's correlation id points at.
const RuntimeCategories = `^(cuda_runtime|cuda_driver|Runtime|hip_runtime|hip_driver|mtia_runtime|xpu_runtime|glow_runtime|privateuse1_runtime|privateuse1_driver)$`

// Defaults are the built-in rules, tried in order after the user's.
var Defaults = []Rule{
	// annotations first: a step or a user range is never compute
	{Class: "annotation", Cat: `^(user_annotation|gpu_user_annotation|Trace|python_function)$`},
	{Class: "annotation", Name: `^(ProfilerStep#\d+|## .* ##|Optimizer\.(step|zero_grad)#.*|DistributedDataParallel\.forward|PyTorch Profiler.*|Iteration Start.*|Record Window End|CYCLE_START)$`},
	// sync before runtime: cudaDeviceSynchronize is a wait, not a launch
	{Class: "sync", Cat: `^cuda_sync$`},
	{Class: "sync", Name: `(?i)^((cuda|hip)(Device|Stream|Event|Ctx)?Synchroni[sz]e|(Stream|Event|Context|Device) Sync|Stream Wait Event|(cuda|hip)StreamWaitEvent)`},
	// every runtime Kineto knows (CUDA, ROCm, MTIA, XPU, Glow and the
	// PrivateUse1 backends): their calls launch what runs on the device
	{Class: "runtime", Cat: RuntimeCategories},
	{Class: "runtime", Name: `^(cuda|hip|hsa_|cu)[A-Z]\w*$`},
	// BytePS's device↔host copies are stages of a "Comm." gradient
	{Class: "memory", Name: `^Comm\..*\.(COPYD2H|COPYH2D)$`},
	// communication, every vintage: NCCL ≤2.17 and ≥2.18, RCCL, HCCL, gloo,
	// MPI, c10d ops, Horovod activities, BytePS queue stages
	{Class: "comm", Name: `^(nccl|rccl|hccl)|ncclKernel|ncclDevKernel|^(gloo|c10d|mpi|ucc|nccl):|^c10d::|^record_param_comms$|^(NCCL|MPI|GLOO|CCL|GLOO_MPI)_(ALLREDUCE|ALLGATHER|BCAST|BROADCAST|REDUCESCATTER|REDUCE|ALLTOALL|ADASUM_ALLREDUCE)$|\.(PUSH|PULL|REDUCE|BROADCAST|PCIE_REDUCE|COORDINATE_REDUCE|COORDINATE_PUSH|COORDINATE_BROADCAST)$|^Comm\.`},
	// Horovod's response spans enclose queueing and copies: annotations,
	// their NCCL_/MPI_/GLOO_ activities are the communication
	{Class: "annotation", Name: `^(ALLREDUCE|ALLGATHER|BROADCAST|ALLTOALL|REDUCESCATTER|ADASUM|BARRIER|JOIN)$`},
	{Class: "memory", Cat: `^(gpu_memcpy|gpu_memset|Memcpy|Memset)$`},
	{Class: "memory", Name: `^(hip)?Mem(cpy|set)|^dma|^\[memory\]$|copy_bucket_to_grad|^MEMCPY_|\.(COPYD2H|COPYH2D)$`},
	// Horovod bookkeeping that is neither math nor transfer
	{Class: "other", Name: `^(NEGOTIATE_\w+|QUEUE|WAIT_FOR_DATA|WAIT_FOR_OTHER_TENSOR_DATA|INIT_FUSION_BUFFER|ALLOCATE_OUTPUT)$`},
	{Class: "other", Cat: `^(horovod_tick|tensor_ready|cpu_instant_event)$`},
}

type compiled struct {
	class Class
	name  *regexp.Regexp
	cat   *regexp.Regexp
}

// Classifier applies rules, caching the answer per (name, category). It
// is not safe for concurrent use.
type Classifier struct {
	rules []compiled
	cache map[[2]string]Class
	last  [2]string
	lastC Class
	// lastOK: last is set (a zero last would answer ("", "") wrongly)
	lastOK bool
	// byPtr answers for strings seen before by their data pointers
	// (the trace reader interns names and categories): no hashing of
	// their bytes. An entry holds its pointers, so they stay valid.
	byPtr [256]ptrEntry
}

type ptrEntry struct {
	name, cat  *byte
	nlen, clen int
	class      Class
	valid      bool
}

// New compiles user rules (tried first) and, unless noDefaults, the
// defaults after them.
func New(user []Rule, noDefaults bool) (*Classifier, error) {
	all := append([]Rule(nil), user...)
	if !noDefaults {
		all = append(all, Defaults...)
	}
	c := &Classifier{cache: map[[2]string]Class{}}
	for i, r := range all {
		cl, err := Parse(r.Class)
		if err != nil {
			return nil, fmt.Errorf("class rule %d: %w", i, err)
		}
		cr := compiled{class: cl}
		if r.Name != "" {
			if cr.name, err = regexp.Compile(r.Name); err != nil {
				return nil, fmt.Errorf("class rule %d (%s): name: %w", i, r.Class, err)
			}
		}
		if r.Cat != "" {
			if cr.cat, err = regexp.Compile(r.Cat); err != nil {
				return nil, fmt.Errorf("class rule %d (%s): cat: %w", i, r.Class, err)
			}
		}
		if cr.name == nil && cr.cat == nil {
			return nil, fmt.Errorf("class rule %d (%s): needs a name or a cat pattern", i, r.Class)
		}
		c.rules = append(c.rules, cr)
	}
	return c, nil
}

// ParseFlag parses CLASS=REGEX (a name rule) or CLASS=cat:REGEX.
func ParseFlag(s string) (Rule, error) {
	cl, re, ok := strings.Cut(s, "=")
	if !ok {
		return Rule{}, fmt.Errorf("class rule %q: want CLASS=REGEX or CLASS=cat:REGEX", s)
	}
	if rest, ok := strings.CutPrefix(re, "cat:"); ok {
		return Rule{Class: cl, Cat: rest}, nil
	}
	return Rule{Class: cl, Name: re}, nil
}

// ReadRules reads a JSON array of rules.
func ReadRules(r io.Reader) ([]Rule, error) {
	var rules []Rule
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("class rules: %w", err)
	}
	return rules, nil
}

// Classify returns the class of an event. Complete events ('X') that no
// rule matches are compute; anything else unmatched is Other.
func (c *Classifier) Classify(name, cat string, ph byte) Class {
	np, cp := unsafe.StringData(name), unsafe.StringData(cat)
	h := (uintptr(unsafe.Pointer(np))>>4 ^ uintptr(unsafe.Pointer(cp))>>6 ^ uintptr(len(name))) % uintptr(len(c.byPtr))
	e := &c.byPtr[h]
	if e.name == np && e.cat == cp && e.nlen == len(name) && e.clen == len(cat) && e.valid {
		return c.fallback(e.class, ph)
	}
	cl := c.classify(name, cat)
	*e = ptrEntry{name: np, cat: cp, nlen: len(name), clen: len(cat), class: cl, valid: true}
	return c.fallback(cl, ph)
}

// classify is Classify before the fallback, cached by value.
func (c *Classifier) classify(name, cat string) Class {
	key := [2]string{name, cat}
	if key == c.last && c.lastOK {
		return c.lastC
	}
	if cl, ok := c.cache[key]; ok {
		c.last, c.lastC, c.lastOK = key, cl, true
		return cl
	}
	cl := Class(255)
	for _, r := range c.rules {
		if r.name != nil && !r.name.MatchString(name) {
			continue
		}
		if r.cat != nil && !r.cat.MatchString(cat) {
			continue
		}
		cl = r.class
		break
	}
	if len(c.cache) < 1<<18 {
		c.cache[key] = cl
	}
	c.last, c.lastC, c.lastOK = key, cl, true
	return cl
}

func (c *Classifier) fallback(cl Class, ph byte) Class {
	if cl != 255 {
		return cl
	}
	if ph == 'X' {
		return Compute
	}
	return Other
}
