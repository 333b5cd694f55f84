package mesh

// Kill simulates a crash of this rank: every connection closes at once,
// with no goodbye, and this rank's own readers stay quiet. The control
// connections close first: a crashed rank 0 judges nothing, so no report
// may reach its (in-process, still running) readers after the data
// connections drop.
func (m *Mesh) Kill() {
	m.closing.Store(true)
	m.closedOnce.Do(func() { close(m.closed) })
	if m.ctrl != nil {
		_ = m.ctrl.conn.Close()
	}
	for _, c := range m.ctrls {
		if c != nil {
			_ = c.conn.Close()
		}
	}
	m.abortMu.Lock()
	for _, p := range m.peers {
		if p != nil {
			_ = p.conn.Close()
		}
	}
	m.abortMu.Unlock()
	m.bgWG.Wait()
}

// HookControlLost makes f run in every non-zero rank's control reader that
// finds its connection to rank 0 failed while its rank was not closing;
// the returned function removes the hook.
func HookControlLost(f func(m *Mesh)) (restore func()) {
	ctrlLostHook.Store(&f)
	return func() { ctrlLostHook.Store(nil) }
}

// Closing says whether Close (or Kill) has begun on m.
func (m *Mesh) Closing() bool { return m.closing.Load() }
