package mcp

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// TaskRecord is what a TaskStore keeps of a task: its state as tasks/get
// tells it, and what the server needs to go on with it.
type TaskRecord struct {
	DetailedTask
	// Owner is who may read, answer and cancel the task
	// (TaskOptions.Owner); "" when the server tells no one apart.
	Owner string `json:"owner,omitempty"`
	// Responses are the answers tasks/update brought to input requests
	// that are no longer outstanding, by key, until the server takes them:
	// when the last outstanding request is answered.
	Responses map[string]json.RawMessage `json:"responses,omitempty"`
	// ExpiresAt is when the store discards the record; zero for never.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// clone returns a copy of r that shares no map with it (the raw values
// are never written in place).
func (r *TaskRecord) clone() *TaskRecord {
	c := *r
	c.InputRequests = maps.Clone(r.InputRequests)
	c.Responses = maps.Clone(r.Responses)
	if r.TTLMs != nil {
		ttl := *r.TTLMs
		c.TTLMs = &ttl
	}
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	return &c
}

// TaskStore keeps task records, for as long as each one's ExpiresAt. A
// store shared by several processes (the hub's, over Redis) lets any of
// them answer tasks/get, tasks/update and tasks/cancel, while the one
// running the task hears of the changes through Watch. Its methods may be
// called concurrently.
type TaskStore interface {
	// Create stores a new record. It returns once Get finds it, here and
	// in every process sharing the store: a server answers with the task
	// only then (the extension's durable create). An id already taken is
	// an error.
	Create(ctx context.Context, rec *TaskRecord) error
	// Get returns a copy of the record of id, or ErrTaskNotFound when there
	// is none or it expired.
	Get(ctx context.Context, id string) (*TaskRecord, error)
	// Update changes the record of id with fn, atomically with respect to
	// every other Update of it, and returns the record as changed. fn gets
	// a copy; when it returns an error nothing changes and Update returns
	// that error. ErrTaskNotFound when there is no record.
	Update(ctx context.Context, id string, fn func(*TaskRecord) error) (*TaskRecord, error)
	// Watch returns a channel that receives after changes of the record of
	// id (one receive may stand for several), and when the record is
	// discarded, until stop is called. Changes made by any process sharing
	// the store count.
	Watch(id string) (changed <-chan struct{}, stop func())
}

var _ TaskStore = (*MemoryTaskStore)(nil)

// DefaultMaxTaskRecords bounds a MemoryTaskStore made with 0.
const DefaultMaxTaskRecords = 10_000

// ErrTooManyTasks is -32603 for a task that would take a store past its
// bound, or a server past the tasks it runs at once.
var ErrTooManyTasks = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Too many tasks: try again later"}

// MemoryTaskStore is a TaskStore in this process's memory: the default of
// a Server, whose tasks run where their records are.
type MemoryTaskStore struct {
	max int
	now func() time.Time

	mu        sync.Mutex
	records   map[string]*TaskRecord
	watchers  map[string]map[chan struct{}]struct{}
	nextSweep time.Time
}

// NewMemoryTaskStore returns a store of at most max live records
// (DefaultMaxTaskRecords for 0): a Create past it is ErrTooManyTasks.
func NewMemoryTaskStore(max int) *MemoryTaskStore {
	if max <= 0 {
		max = DefaultMaxTaskRecords
	}
	return &MemoryTaskStore{max: max, now: time.Now, records: map[string]*TaskRecord{},
		watchers: map[string]map[chan struct{}]struct{}{}}
}

// Create implements TaskStore.
func (m *MemoryTaskStore) Create(_ context.Context, rec *TaskRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	if _, ok := m.liveLocked(rec.TaskID); ok {
		return jsonrpc.Errorf(jsonrpc.ErrInternal, "task id %q is taken", rec.TaskID)
	}
	if len(m.records) >= m.max {
		return ErrTooManyTasks
	}
	m.records[rec.TaskID] = rec.clone()
	return nil
}

// Get implements TaskStore.
func (m *MemoryTaskStore) Get(_ context.Context, id string) (*TaskRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.liveLocked(id)
	if !ok {
		return nil, ErrTaskNotFound
	}
	return rec.clone(), nil
}

// Update implements TaskStore.
func (m *MemoryTaskStore) Update(_ context.Context, id string, fn func(*TaskRecord) error) (*TaskRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.liveLocked(id)
	if !ok {
		return nil, ErrTaskNotFound
	}
	c := rec.clone()
	if err := fn(c); err != nil {
		return nil, err
	}
	c.TaskID = id
	m.records[id] = c
	m.notifyLocked(id)
	return c.clone(), nil
}

// Watch implements TaskStore.
func (m *MemoryTaskStore) Watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	if m.watchers[id] == nil {
		m.watchers[id] = map[chan struct{}]struct{}{}
	}
	m.watchers[id][ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers[id], ch)
		if len(m.watchers[id]) == 0 {
			delete(m.watchers, id)
		}
	}
}

// liveLocked returns the record of id unless it expired; an expired one
// is discarded.
func (m *MemoryTaskStore) liveLocked(id string) (*TaskRecord, bool) {
	rec, ok := m.records[id]
	if !ok {
		return nil, false
	}
	if !rec.ExpiresAt.IsZero() && !m.now().Before(rec.ExpiresAt) {
		m.discardLocked(id)
		return nil, false
	}
	return rec, true
}

// sweepLocked discards the expired records, at most once a second: a
// store that is only ever written to does not keep them for ever.
func (m *MemoryTaskStore) sweepLocked() {
	now := m.now()
	if now.Before(m.nextSweep) {
		return
	}
	m.nextSweep = now.Add(time.Second)
	for id, rec := range m.records {
		if !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt) {
			m.discardLocked(id)
		}
	}
}

func (m *MemoryTaskStore) discardLocked(id string) {
	delete(m.records, id)
	m.notifyLocked(id)
}

// notifyLocked tells the watchers of id, without waiting for any: a
// watcher with a receive pending already has one to take.
func (m *MemoryTaskStore) notifyLocked(id string) {
	for ch := range m.watchers[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
