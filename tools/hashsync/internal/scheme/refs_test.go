package scheme

import "sync"

// mergeRuns merges runs of rows (each ascending, pairwise disjoint) with a
// merger, as a receiver does: each run cut into chunks of up to chunk
// rows, every run's chunks added and merged in order by its own
// goroutine, the runs concurrently.
func mergeRuns(name string, rows, width int, runs []list, chunk int) (*Tensor, error) {
	idx, cb := make([][]uint32, len(runs)), make([][]int, len(runs))
	for q, r := range runs {
		idx[q], cb[q] = r.idx, []int{0}
		for lo := 0; lo < len(r.idx); lo += chunk {
			cb[q] = append(cb[q], min(lo+chunk, len(r.idx)))
		}
	}
	m := newMerger(name, rows, width, idx, cb, nil)
	var wg sync.WaitGroup
	for q, r := range runs {
		wg.Go(func() {
			for c := range len(cb[q]) - 1 {
				m.add(q, c, r.val[cb[q][c]*width:cb[q][c+1]*width])
				m.merge()
			}
		})
	}
	wg.Wait()
	return m.done()
}
