package jaegertest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
)

// A span posted as OTLP JSON to the HTTP receiver is read back by trace id
// and by service, with its parent, kind, attributes and resource.
func TestJaeger_roundTrip(t *testing.T) {
	j := jaegertest.Start(t)
	since := time.Now().Add(-time.Minute)
	const traceID = "5b8efff798038103d269b633813fc60c"
	now := time.Now().UnixNano()
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"jaegertest"}}]},
		"scopeSpans":[{"spans":[
		{"traceId":%[1]q,"spanId":"eee19b7ec3c1b174","name":"parent","kind":2,"startTimeUnixNano":"%[2]d","endTimeUnixNano":"%[3]d",
		 "attributes":[{"key":"n","value":{"intValue":"7"}},{"key":"s","value":{"stringValue":"x"}}]},
		{"traceId":%[1]q,"spanId":"eee19b7ec3c1b175","parentSpanId":"eee19b7ec3c1b174","name":"child","kind":3,
		 "startTimeUnixNano":"%[2]d","endTimeUnixNano":"%[3]d","status":{"code":2,"message":"boom"}}]}]}]}`,
		traceID, now, now+int64(time.Millisecond))
	resp, err := http.Post(j.OTLPHTTP()+"/v1/traces", "application/json", bytes.NewBufferString(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	tr := j.WaitTrace(t, traceID, 2)
	assert.Equal(t, traceID, tr.ID)
	parent, child := tr.Span("parent"), tr.Span("child")
	require.NotNil(t, parent)
	require.NotNil(t, child)
	assert.Equal(t, parent.SpanID, child.ParentID)
	assert.Empty(t, parent.ParentID)
	assert.Equal(t, "SERVER", parent.Kind)
	assert.Equal(t, "CLIENT", child.Kind)
	assert.Equal(t, "7", parent.Attributes["n"])
	assert.Equal(t, "x", parent.Attributes["s"])
	assert.Equal(t, "jaegertest", child.Resource["service.name"])
	assert.Equal(t, "ERROR", child.StatusCode)
	assert.Equal(t, "boom", child.StatusMessage)

	traces := j.WaitTraces(t, "jaegertest", since, func(tr *jaegertest.Trace) bool { return tr.ID == traceID })
	assert.Len(t, traces, 1)

	_, err = j.Trace(context.Background(), "0123456789abcdef0123456789abcdef")
	assert.ErrorIs(t, err, jaegertest.ErrNotFound)
}

// Stop ends the process: its receivers refuse connections afterwards.
func TestJaeger_stop(t *testing.T) {
	j := jaegertest.Start(t)
	j.Stop()
	_, err := http.Post(j.OTLPHTTP()+"/v1/traces", "application/json", bytes.NewBufferString(`{}`))
	assert.Error(t, err)
	j.Stop() // stopping again does nothing
}

// When Jaeger cannot be built, Binary says why and what to run, and leaves
// no half-built binary behind.
func TestBinary_buildFails(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "e2e", "tracing"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "e2e", "tracing", "go.mod"), []byte("module example.com/notjaeger\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "e2e", "tracing", "go.sum"), nil, 0o644))
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv(jaegertest.EnvBinary, "")
	t.Chdir(root)

	_, err := jaegertest.Binary()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot build Jaeger")
	assert.Contains(t, err.Error(), "make deps")
	assert.Contains(t, err.Error(), "cannot find module providing package", "go build's own words follow")
	matches, _ := filepath.Glob(filepath.Join(cache, "switchboard", "jaeger", "*", "jaeger*"))
	assert.Empty(t, matches)

	t.Setenv(jaegertest.EnvBinary, filepath.Join(root, "missing"))
	_, err = jaegertest.Binary()
	require.Error(t, err)
	assert.Contains(t, err.Error(), jaegertest.EnvBinary)
}
