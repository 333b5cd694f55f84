package agent

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/tools/ckpt/internal/store"
)

// sealed stores data as owner's shard of iter (epoch 0) in a's store.
func sealed(t *testing.T, a *Agent, owner int, iter int64, data []byte) {
	t.Helper()
	v, err := a.st.Begin(owner, iter, 0, int64(len(data)), FormatRaw, time.Second)
	require.NoError(t, err)
	copy(v.Data(), data)
	require.NoError(t, a.st.Seal(v, 0))
}

// speculativeRestore serves one streamed restore of the latest iteration
// the way trainerRestore does: the speculation first, then the hand-over
// of the version the agents agreed on (target), then "release". It returns
// every buffer the trainer's use was given, and the restore's result.
func speculativeRestore(t *testing.T, a *Agent, target int64) ([][]byte, Result, error) {
	t.Helper()
	cn, cl := streamPair(t)
	agentErr := serveRequest(cn, func(meta map[string]string) error {
		s := &streamer{cn: cn}
		s.spec = a.speculate(s)
		defer s.spec.finish()
		v := a.st.Get(a.cfg.Rank, target, store.AnyEpoch)
		if v == nil {
			return fmt.Errorf("no version of iteration %d", target)
		}
		hv, _, err := a.handOver(cn, meta, target, target, "local", v, nil, v.Data(), v.XXH3, FormatRaw, false, s)
		if hv == nil {
			return err
		}
		defer a.st.Unpin(hv)
		return serveRelease(cn)
	})
	var seen [][]byte
	res, err := cl.RestoreShm(-1, func(mem []byte, ready func(int64) error) error {
		if err := ready(int64(len(mem))); err != nil {
			return err
		}
		seen = append(seen, bytes.Clone(mem))
		return nil
	})
	require.NoError(t, <-agentErr)
	return seen, res, err
}

// TestSpeculativeRestore: a streamed restore announces the newest
// committed version this agent holds before the agents agree. When they
// agree on it, the trainer copies it once; when they agree on another
// (this agent had not learned the newer commit), the trainer is moved to
// it and what it copied first is not returned; a version whose bytes no
// longer match its digest fails with "corrupt" even though it was hashed
// ahead; and the speculation's pin is released in every case.
func TestSpeculativeRestore(t *testing.T) {
	one := bytes.Repeat([]byte("one."), 4096)
	two := bytes.Repeat([]byte("two!"), 4096)
	setup := func(t *testing.T, committed int64) *Agent {
		a := newTestAgent(t, 0, 2)
		sealed(t, a, 0, 1, one)
		sealed(t, a, 0, 2, two)
		a.st.SetCommitted(committed, 0)
		return a
	}
	freed := func(t *testing.T, a *Agent) {
		t.Helper()
		require.Equal(t, int64(len(one)+len(two)), a.st.Drop(0, 3), "a version is still pinned")
	}

	t.Run("agreed", func(t *testing.T) {
		a := setup(t, 2)
		seen, res, err := speculativeRestore(t, a, 2)
		require.NoError(t, err)
		require.Equal(t, [][]byte{two}, seen)
		require.Equal(t, "2", res[kIter])
		require.Equal(t, "local", res[kSource])
		freed(t, a)
	})
	t.Run("moved", func(t *testing.T) {
		a := setup(t, 1)
		seen, res, err := speculativeRestore(t, a, 2)
		require.NoError(t, err)
		require.Equal(t, [][]byte{one, two}, seen)
		require.Equal(t, "2", res[kIter])
		freed(t, a)
	})
	t.Run("corrupt", func(t *testing.T) {
		a := setup(t, 2)
		v := a.st.Get(0, 2, store.AnyEpoch)
		v.Data()[100] ^= 1
		a.st.Unpin(v)
		_, _, err := speculativeRestore(t, a, 2)
		var re *RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "corrupt", re.Code)
		freed(t, a)
	})
	t.Run("nothing committed", func(t *testing.T) {
		a := newTestAgent(t, 0, 2)
		sealed(t, a, 0, 1, one)
		cn, _ := streamPair(t)
		s := &streamer{cn: cn}
		require.Nil(t, a.speculate(s))
		require.False(t, s.told, "the trainer was told of a buffer")
	})
}
