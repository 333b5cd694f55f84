package scheme

import (
	"fmt"
	"sync"

	"trainwire.dev/lib/tensor"
)

// merger merges runs of rows (each ascending, pairwise disjoint) into one
// ascending tensor while their values are still landing: a run's values
// arrive in chunks, in order, and every row below the watermark (the
// smallest row not yet landed of any run) can be merged at once. The
// output is written front to back, a k-way merge of the runs' heads:
// sequential writes, where placing each run by rank into the output
// scattered them (a read for ownership per row on a result out of cache:
// 70 against 30 ns a row for 85,000 rows of 16 floats,
// BenchmarkMergerPlace).
//
// add and merge may be called from any goroutine; add must see each run's
// chunks in order.
type merger struct {
	t     *Tensor
	runs  []mergeRun
	heads []uint64 // each run's next row to merge (step's scratch)
	at    int      // rows merged

	mu    sync.Mutex
	busy  bool  // a merge is running
	again bool  // a chunk was added while it ran
	err   error // a row in two runs, or a run not ascending
	zeros int   // all-zero rows merged
}

// mergeRun is one run: its rows, its chunk bounds and the chunks landed.
type mergeRun struct {
	idx   []uint32
	cb    []int       // chunk c holds rows cb[c] ≤ k < cb[c+1]
	val   [][]float32 // chunk c's values, once added
	ended int         // rows landed (under mu)
	// The merging goroutine's cursor: the next row, the rows it may
	// merge, and the chunk holding the next row.
	k, end, c int
}

// newMerger lays out the output of runs: run q has rows idx[q] (ascending)
// in chunks bounded by cb[q] (cb[q][0] = 0, the last = len(idx[q])). The
// values come from pool when it is not nil (every one is written by a
// merge).
func newMerger(name string, rows, width int, idx [][]uint32, cb [][]int, pool *tensor.Pool) *merger {
	total := 0
	m := &merger{runs: make([]mergeRun, len(idx)), heads: make([]uint64, len(idx))}
	for q := range idx {
		total += len(idx[q])
		m.runs[q] = mergeRun{idx: idx[q], cb: cb[q], val: make([][]float32, len(cb[q])-1)}
	}
	var val []float32
	if pool != nil {
		val = getResult(pool, total*width)
	} else {
		val = make([]float32, total*width)
	}
	m.t = &Tensor{Name: name, Rows: rows, Width: width, Idx: make([]uint32, total), Val: val}
	return m
}

// add records chunk c of run q (its values, one row after the other);
// merge then takes it.
func (m *merger) add(q, c int, val []float32) {
	m.mu.Lock()
	r := &m.runs[q]
	r.val[c] = val
	r.ended = r.cb[c+1]
	m.mu.Unlock()
}

// merge merges every row below the watermark. A call while another runs
// leaves the work to that one, which looks again before it returns.
func (m *merger) merge() {
	m.mu.Lock()
	if m.busy {
		m.again = true
		m.mu.Unlock()
		return
	}
	m.busy = true
	for {
		m.again = false
		for q := range m.runs {
			m.runs[q].end = m.runs[q].ended
		}
		failed := m.err != nil
		m.mu.Unlock()
		var err error
		if !failed {
			err = m.step()
		}
		m.mu.Lock()
		if err != nil && m.err == nil {
			m.err = err
		}
		if !m.again || m.err != nil {
			break
		}
	}
	m.busy = false
	m.mu.Unlock()
}

// step merges the rows below the watermark of the cursors' ends: the
// smallest row of any run not landed (none: every row). Heads are uint64
// so that a run with nothing to merge can sit above every row.
func (m *merger) step() error {
	const none = 1 << 32
	wm, heads := uint64(none), m.heads
	for q := range m.runs {
		r := &m.runs[q]
		heads[q] = none
		if r.k < r.end {
			heads[q] = uint64(r.idx[r.k])
		}
		if r.end < len(r.idx) {
			wm = min(wm, uint64(r.idx[r.end]))
		}
	}
	t, w, at, zeros := m.t, m.t.Width, m.at, 0
	defer func() { m.at = at; m.mu.Lock(); m.zeros += zeros; m.mu.Unlock() }()
	last := int64(-1)
	if at > 0 {
		last = int64(t.Idx[at-1])
	}
	for {
		bq, best := 0, heads[0]
		for q := 1; q < len(heads); q++ {
			if heads[q] < best {
				bq, best = q, heads[q]
			}
		}
		if best >= wm {
			return nil
		}
		if int64(best) <= last {
			return fmt.Errorf("merging: row %d after row %d (run %d): a row in two runs, or a run not ascending", best, last, bq)
		}
		r := &m.runs[bq]
		for r.k >= r.cb[r.c+1] {
			r.c++
		}
		o := (r.k - r.cb[r.c]) * w
		src := r.val[r.c][o : o+w]
		t.Idx[at] = uint32(best)
		copyRow(t.Val[at*w:at*w+w], src)
		if src[0] == 0 && !nonzero(src[1:]) {
			zeros++
		}
		r.k++
		heads[bq] = none
		if r.k < r.end {
			heads[bq] = uint64(r.idx[r.k])
		}
		last = int64(best)
		at++
	}
}

// done returns the output once every run is merged; a later Compact skips
// its pass when no merged row was all zero.
func (m *merger) done() (*Tensor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	if m.busy || m.at != len(m.t.Idx) {
		return nil, fmt.Errorf("internal: merged %d of %d rows", m.at, len(m.t.Idx))
	}
	m.t.compact = m.zeros == 0
	return m.t, nil
}
