package scheme

// mergeLists merges runs of rows with pairwise disjoint indices, each
// ascending, into one ascending tensor (see merger). Overlapping runs
// cannot happen with disjoint partitions: they panic.
func mergeLists(name string, rows, width int, runs []list) *Tensor {
	m, err := newMerger(name, rows, width, runs, nil)
	if err != nil {
		panic("scheme: " + err.Error())
	}
	total := len(m.t.Idx)
	// The runs land in disjoint places: large merges copy half of them on
	// a second goroutine.
	if total*width < 1<<16 || len(runs) < 2 {
		for _, r := range runs {
			m.place(r)
		}
		return m.t
	}
	half, sum := len(runs), 0
	for k, r := range runs {
		sum += len(r.idx)
		if 2*sum >= total {
			half = k + 1
			break
		}
	}
	half = min(half, len(runs)-1)
	done := make(chan struct{})
	go func() {
		for _, r := range runs[half:] {
			m.place(r)
		}
		close(done)
	}()
	for _, r := range runs[:half] {
		m.place(r)
	}
	<-done
	return m.t
}
