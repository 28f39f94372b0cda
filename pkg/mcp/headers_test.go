package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestHeaderValues: SEP-2243's table of values, both ways.
func TestHeaderValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, header string }{
		{"us-west1", "us-west1"},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"", "=?base64??="},
	} {
		assert.Equal(t, tc.header, mcp.EncodeHeaderValue(tc.value), "%q", tc.value)
		got, err := mcp.DecodeHeaderValue(tc.header)
		require.Nil(t, err, "%q", tc.header)
		assert.Equal(t, tc.value, got)
	}
	for _, literal := range []string{"=?base64?SGVsbG8=", "SGVsbG8=?=", "=?BASE64?SGVsbG8=?="} {
		got, err := mcp.DecodeHeaderValue(literal)
		require.Nil(t, err)
		assert.Equal(t, literal, got, "only both markers, as written, mean base64")
	}
	got, err := mcp.DecodeHeaderValue("  spaced\t")
	require.Nil(t, err)
	assert.Equal(t, "spaced", got, "whitespace around a value is not part of it")
	for _, bad := range []string{
		"=?base64?SGVsbG8?=",     // unpadded
		"=?base64?SGVs!!!bG8=?=", // not the alphabet
		"=?base64?SGVsbG9=?=",    // bits after the last byte
		"=?base64?/w==?=",        // not UTF-8
		"caf\xc3\xa9",            // not ASCII
		"a\x00b",                 // a control character
	} {
		_, err := mcp.DecodeHeaderValue(bad)
		require.NotNil(t, err, "%q", bad)
		assert.Equal(t, mcp.CodeHeaderMismatch, err.Code)
	}
}

// deploySchema marks region, a nested zone and a count for headers.
const deploySchema = `{"type":"object","properties":{
	"region":{"type":"string","x-mcp-header":"Region"},
	"target":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
	"count":{"type":"integer","x-mcp-header":"Count"},
	"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},
	"bad":{"type":"string","x-mcp-header":"not a token"},
	"query":{"type":"string"}}}`

// TestCheckParamHeaders: every argument the schema mirrors needs its
// header, saying the same; an argument not sent takes none.
func TestCheckParamHeaders(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		args   string
		header http.Header
		ok     bool
	}{
		{"nothing mirrored, nothing sent", `{"query":"q"}`, h(), true},
		{"null is not sent", `{"region":null}`, h(), true},
		{"all of them", `{"region":"us-west1","target":{"zone":"b"},"count":3,"dry":true}`,
			h("Mcp-Param-Region", "us-west1", "mcp-param-zone", "b", "Mcp-Param-Count", "3", "Mcp-Param-Dry-Run", "true"), true},
		{"base64", `{"region":"Hello, 世界"}`, h("Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?="), true},
		{"a number as another client prints it", `{"count":3}`, h("Mcp-Param-Count", "3.0"), true},
		{"an annotation that is no token names no header", `{"bad":"x"}`, h(), true},
		{"a header nothing names", `{}`, h("Mcp-Param-Other", "x"), true},
		{"missing", `{"region":"us-west1"}`, h(), false},
		{"nested, missing", `{"target":{"zone":"b"}}`, h(), false},
		{"disagrees", `{"region":"us-west1"}`, h("Mcp-Param-Region", "eu-west1"), false},
		{"case of the value counts", `{"region":"us-west1"}`, h("Mcp-Param-Region", "US-WEST1"), false},
		{"another number", `{"count":3}`, h("Mcp-Param-Count", "4"), false},
		{"a boolean spelt otherwise", `{"dry":true}`, h("Mcp-Param-Dry-Run", "True"), false},
		{"sent without its argument", `{}`, h("Mcp-Param-Region", "us-west1"), false},
		{"twice", `{"region":"a"}`, h("Mcp-Param-Region", "a", "Mcp-Param-Region", "a"), false},
		{"bad base64", `{"region":"Hello"}`, h("Mcp-Param-Region", "=?base64?SGVsbG8?="), false},
		{"an object cannot be mirrored", `{"region":{"a":1}}`, h("Mcp-Param-Region", `{"a":1}`), false},
	} {
		err := mcp.CheckParamHeaders(tc.header, json.RawMessage(deploySchema), json.RawMessage(tc.args))
		if tc.ok {
			assert.Nil(t, err, tc.name)
		} else if assert.NotNil(t, err, tc.name) {
			assert.Equal(t, mcp.CodeHeaderMismatch, err.Code, tc.name)
		}
	}
	set := http.Header{}
	mcp.SetParamHeaders(set, json.RawMessage(deploySchema),
		json.RawMessage(`{"region":" padded ","target":{"zone":"b"},"count":3,"dry":false,"bad":"x","query":"q"}`))
	assert.Equal(t, http.Header{
		"Mcp-Param-Region": {"=?base64?IHBhZGRlZCA=?="}, "Mcp-Param-Zone": {"b"},
		"Mcp-Param-Count": {"3"}, "Mcp-Param-Dry-Run": {"false"},
	}, set)
}

// TestStreamableHandler_strictHeaders: a POST of 2026-07-28 is refused with
// 400 and -32020 when it lacks a header SEP-2243 requires (Mcp-Method on
// every request; Mcp-Name for a tool, prompt, resource or task; the
// Mcp-Param-* headers of the arguments the tool's schema mirrors) or one
// says otherwise than the body; a well-behaved client, the conn of
// DialStreamable, sends them all, learning the tool's schema from the list
// it carried (and the Client lists again once when a call is refused so).
func TestStreamableHandler_strictHeaders(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}})
	var mu sync.Mutex
	var calls []string
	s.AddTool(&mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(deploySchema)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			calls = append(calls, string(req.Params.Arguments))
			mu.Unlock()
			return textResult("deployed"), nil
		})
	s.AddTool(echoTool("echo"))
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
		s.Serve(sess.Context(), sess.Conn())
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	raw := &rawClient{t: t, url: srv.URL, client: srv.Client()}
	post := func(method, params string, header ...string) (int, string) {
		body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + string(modern(t, params, `{}`)) + `}`
		name, _ := jsonrpc.StringMember([]byte(params), mcp.NameMember(method))
		hdr := append([]string{mcp.HeaderProtocolVersion, mcp.ModernVersion, mcp.HeaderMethod, method, mcp.HeaderName, name}, header...)
		resp := raw.do(http.MethodPost, body, hdr...)
		msgs := readAll(t, resp)
		require.Len(t, msgs, 1)
		return resp.StatusCode, msgs[0]
	}
	refused := func(what string, status int, body string) {
		t.Helper()
		assert.Equal(t, http.StatusBadRequest, status, what)
		assert.Contains(t, body, `"code":-32020`, what)
		assert.Contains(t, body, `"id":7`, what)
	}
	const args = `"arguments":{"region":"us-west1","count":2}`

	status, body := post(mcp.MethodToolsList, `{}`, mcp.HeaderMethod, "")
	refused("no Mcp-Method", status, body)
	status, body = post(mcp.MethodToolsList, `{}`, mcp.HeaderMethod, "TOOLS/LIST")
	refused("a method's case counts", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"echo"}`, mcp.HeaderName, "")
	refused("a tool's call without Mcp-Name", status, body)
	status, body = post(mcp.MethodResourcesRead, `{"uri":"mem://a"}`, mcp.HeaderName, "")
	refused("a read without Mcp-Name", status, body)
	status, body = post(mcp.MethodTasksGet, `{"taskId":"t-1"}`, mcp.HeaderName, "")
	refused("tasks/get without Mcp-Name", status, body)
	status, body = post(mcp.MethodTasksGet, `{"taskId":"t-1"}`, mcp.HeaderName, "t-2")
	refused("tasks/get naming another task", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"ec\nho"}`, mcp.HeaderName, `ec\nho`)
	refused("a name's escape, given as written (a backslash and an n)", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"ec\u0068o"}`, mcp.HeaderName, `ec\u0068o`)
	refused("a name's \\u escape, given as written", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"deploy",`+args+`}`)
	refused("the arguments' headers missing", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"deploy",`+args+`}`, "Mcp-Param-Region", "us-west1", "Mcp-Param-Count", "3")
	refused("one says otherwise", status, body)
	status, body = post(mcp.MethodToolsCall, `{"name":"deploy",`+args+`}`, "Mcp-Param-Region", "=?base64?dXMtd2VzdDE?=", "Mcp-Param-Count", "2")
	refused("unpadded base64", status, body)
	mu.Lock()
	assert.Empty(t, calls, "no refused call ran")
	mu.Unlock()

	status, body = post(mcp.MethodToolsCall, `{"name":"deploy",`+args+`}`, "Mcp-Param-Region", "=?base64?dXMtd2VzdDE=?=", "Mcp-Param-Count", "2")
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "deployed")
	status, body = post(mcp.MethodToolsCall, `{"name":"echo"}`, mcp.HeaderName, "  echo  ")
	assert.Equal(t, http.StatusOK, status, "whitespace around a value is not part of it: %s", body)
	status, body = post(mcp.MethodToolsCall, `{"name":"echo"}`, mcp.HeaderName, "=?base64?ZWNobw==?=")
	assert.Equal(t, http.StatusOK, status, "a name may come in base64: %s", body)

	// The well-behaved client: it calls before it listed (refused, then it
	// lists and calls again), and after.
	c, err := mcp.Connect(testCtx(t), srv.URL, nil)
	require.NoError(t, err)
	defer c.Close()
	for range 2 {
		res, err := c.CallTool(testCtx(t), "deploy", map[string]any{"region": "eu-west3", "target": map[string]string{"zone": "c"}, "count": 5, "dry": true}, nil)
		require.NoError(t, err)
		assert.Equal(t, "deployed", text(res))
	}
	mu.Lock()
	assert.Len(t, calls, 3)
	mu.Unlock()
}

// FuzzParamHeaders: the header codecs never panic; every string survives
// EncodeHeaderValue and DecodeHeaderValue (whitespace inside a plain value
// included); and what SetParamHeaders sends for a schema and arguments is
// what CheckParamHeaders accepts, while any header the fuzzer adds is
// judged without a panic.
func FuzzParamHeaders(f *testing.F) {
	f.Add("us-west1", deploySchema, `{"region":"us-west1","target":{"zone":"b"},"count":3}`, "=?base64?SGVsbG8=?=")
	f.Add(" padded\n", `{"properties":{"a":{"x-mcp-header":"A","properties":{"b":{"x-mcp-header":"B"}}}}}`, `{"a":{"b":1.5e3}}`, "=?base64?")
	f.Add("=?base64?x?=", `{"properties":{"\u0061":{"x-mcp-\u0068eader":"A"}}}`, `{"a":"é"}`, "\x00")
	f.Add("", `[]`, `null`, "?=")
	f.Fuzz(func(t *testing.T, value, schema, args, extra string) {
		if utf8.ValidString(value) {
			got, err := mcp.DecodeHeaderValue(mcp.EncodeHeaderValue(value))
			require.Nil(t, err, "%q", value)
			require.Equal(t, value, got)
		}
		_, _ = mcp.DecodeHeaderValue(value)
		if !json.Valid([]byte(schema)) || !json.Valid([]byte(args)) {
			return
		}
		h := http.Header{}
		mcp.SetParamHeaders(h, json.RawMessage(schema), json.RawMessage(args))
		for name, v := range h {
			require.Len(t, v, 1, name)
		}
		if err := mcp.CheckParamHeaders(h, json.RawMessage(schema), json.RawMessage(args)); err != nil {
			// Only a schema whose two annotations name one header (a
			// client must not call such a tool) may disagree with itself.
			require.Equal(t, mcp.CodeHeaderMismatch, err.Code)
			require.Contains(t, err.Message, "Mcp-Param-", "%s", err.Message)
		}
		h.Set("Mcp-Param-A", extra)
		_ = mcp.CheckParamHeaders(h, json.RawMessage(schema), json.RawMessage(args))
	})
}
