package mesh

// Kill simulates a crash of this rank: every connection closes at once,
// with no goodbye, and this rank's own readers stay quiet.
func (m *Mesh) Kill() {
	m.closing.Store(true)
	m.closedOnce.Do(func() { close(m.closed) })
	m.abortMu.Lock()
	for _, p := range m.peers {
		if p != nil {
			_ = p.conn.Close()
		}
	}
	m.abortMu.Unlock()
	if m.ctrl != nil {
		_ = m.ctrl.conn.Close()
	}
	for _, c := range m.ctrls {
		if c != nil {
			_ = c.conn.Close()
		}
	}
	m.bgWG.Wait()
}
