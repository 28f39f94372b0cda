package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func record(id string, expires time.Time) *mcp.TaskRecord {
	return &mcp.TaskRecord{DetailedTask: mcp.DetailedTask{Task: mcp.Task{TaskID: id, Status: mcp.TaskWorking}}, ExpiresAt: expires}
}

// TestMemoryTaskStore_records: a record is found once created, copies go
// in and out (a caller's change reaches no one else), an update that
// fails changes nothing, an id is taken once, and the store holds at most
// its bound.
func TestMemoryTaskStore_records(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := mcp.NewMemoryTaskStore(2)
	rec := record("a", time.Time{})
	rec.InputRequests = map[string]mcp.InputRequest{"k": mcp.RootsInput()}
	require.NoError(t, st.Create(ctx, rec))
	rec.InputRequests["other"] = mcp.RootsInput()
	got, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Len(t, got.InputRequests, 1, "Create stored a copy")
	got.InputRequests["other"] = mcp.RootsInput()
	again, _ := st.Get(ctx, "a")
	assert.Len(t, again.InputRequests, 1, "Get returned a copy")

	boom := errors.New("boom")
	_, err = st.Update(ctx, "a", func(r *mcp.TaskRecord) error {
		r.Status = mcp.TaskFailed
		return boom
	})
	assert.ErrorIs(t, err, boom)
	again, _ = st.Get(ctx, "a")
	assert.Equal(t, mcp.TaskWorking, again.Status, "a failed update changes nothing")
	updated, err := st.Update(ctx, "a", func(r *mcp.TaskRecord) error {
		r.TaskID, r.Status = "b", mcp.TaskCompleted
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "a", updated.TaskID, "an update cannot move a record")
	assert.Equal(t, mcp.TaskCompleted, updated.Status)

	assert.Error(t, st.Create(ctx, record("a", time.Time{})), "an id is taken once")
	require.NoError(t, st.Create(ctx, record("b", time.Time{})))
	assert.ErrorIs(t, st.Create(ctx, record("c", time.Time{})), mcp.ErrTooManyTasks)
	_, err = st.Get(ctx, "c")
	assert.ErrorIs(t, err, mcp.ErrTaskNotFound)
	_, err = st.Update(ctx, "c", func(*mcp.TaskRecord) error { return nil })
	assert.ErrorIs(t, err, mcp.ErrTaskNotFound)
}

// TestMemoryTaskStore_watch: a watcher hears of changes and of the
// record's expiry, coalesced, until it stops.
func TestMemoryTaskStore_watch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := mcp.NewMemoryTaskStore(0)
		require.NoError(t, st.Create(ctx, record("a", time.Now().Add(time.Minute))))
		changed, stop := st.Watch("a")
		other, stopOther := st.Watch("a")
		defer stopOther()
		for range 3 {
			_, err := st.Update(ctx, "a", func(r *mcp.TaskRecord) error { r.StatusMessage += "x"; return nil })
			require.NoError(t, err)
		}
		<-changed
		select {
		case <-changed:
			t.Fatal("three changes, heard once: a watcher is never blocked on")
		default:
		}
		<-other

		time.Sleep(time.Minute - time.Nanosecond)
		_, err := st.Get(ctx, "a")
		require.NoError(t, err, "there for all of its TTL")
		time.Sleep(time.Nanosecond)
		_, err = st.Get(ctx, "a")
		assert.ErrorIs(t, err, mcp.ErrTaskNotFound, "expired")
		<-changed // and discarded: the watcher hears of it
		stop()
		require.NoError(t, st.Create(ctx, record("a", time.Time{})), "an expired id is free again")
		_, err = st.Update(ctx, "a", func(*mcp.TaskRecord) error { return nil })
		require.NoError(t, err)
		select {
		case <-changed:
			t.Fatal("a watcher that stopped hears nothing")
		default:
		}
	})
}

// TestMemoryTaskStore_sweeps: records nobody reads are discarded when
// they expire, so that a store only ever written to stays within bounds.
func TestMemoryTaskStore_sweeps(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := mcp.NewMemoryTaskStore(2)
		require.NoError(t, st.Create(ctx, record("a", time.Now().Add(time.Second))))
		require.NoError(t, st.Create(ctx, record("b", time.Now().Add(time.Second))))
		assert.ErrorIs(t, st.Create(ctx, record("c", time.Time{})), mcp.ErrTooManyTasks)
		time.Sleep(time.Second)
		require.NoError(t, st.Create(ctx, record("c", time.Time{})))
		require.NoError(t, st.Create(ctx, record("d", time.Time{})))
	})
}

// TestTasks_expire: a task still running at the end of its TTL is
// stopped, and its id names nothing any more (-32602). (Real time: a peer
// cannot run in a synctest bubble, since pkg/peer pools its reply
// channels across goroutines; TestMemoryTaskStore_watch checks on a fake
// clock that a record lasts all of its TTL.)
func TestTasks_expire(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{TTL: 100 * time.Millisecond}})
	c := tasksClient(t, s)
	task := startSlow(t, c, g)
	assert.ErrorIs(t, recv(t, g.stopped), context.DeadlineExceeded, "stopped at the end of its TTL")
	_, err := c.GetTask(testCtx(t), task.TaskID)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err), "and gone")
}

// TestTaskRecord_json: a record encodes as the task it holds, with what
// the server keeps beside it, and decodes back: a store that keeps JSON
// (the hub's, in Redis) keeps all of it.
func TestTaskRecord_json(t *testing.T) {
	t.Parallel()
	ttl := int64(1000)
	rec := &mcp.TaskRecord{
		DetailedTask: mcp.DetailedTask{
			Task:          mcp.Task{TaskID: "t", Status: mcp.TaskFailed, CreatedAt: "c", LastUpdatedAt: "u", TTLMs: &ttl, PollIntervalMs: 5},
			InputRequests: map[string]mcp.InputRequest{"k": mcp.RootsInput()},
			Error:         &mcp.TaskError{Code: -32603, Message: "m", Data: json.RawMessage(`{"x":1}`)},
		},
		Owner:     "alice",
		Responses: map[string]json.RawMessage{"j": json.RawMessage(`{"action":"accept"}`)},
		ExpiresAt: time.Date(2026, 7, 28, 0, 0, 0, 0, time.UTC),
	}
	raw, err := json.Marshal(rec)
	require.NoError(t, err)
	var back mcp.TaskRecord
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, rec, &back)
	var wire map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &wire))
	assert.JSONEq(t, `"t"`, string(wire["taskId"]), "the task's members are the record's, flat")
}
