package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// FuzzParseObject: ParseObject never panics, and whatever it accepts
// re-encodes with Raw into an object that parses again to the same members.
// The _meta helpers keep every other member while they edit.
func FuzzParseObject(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `1`, ` `, `{"a":1}`, `{"a":1,"a":2}`,
		`{"name":"t","arguments":{"x":[1,{"y":null}]},"_meta":{"progressToken":"p1"}}`,
		`{"_meta":5}`, `{"_meta":null}`, `{"_meta":{}}`, `{"_meta":{"switchboard/relatedRequest":"1"}}`,
		`{"\u00e9\ud83d\ude00":"\u2028<>&"}`, `{"a":1e999}`, `{"a":-0.0e-0}`, "{\"\xff\":\"\xfe\"}",
		`{"a":`, `{"a":1}x`, `{"a" 1}`, `{,}`, `{"a":[1,2,]}`, "\t{\n}\r ",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := mcp.ParseObject(raw)
		if err != nil {
			assert.ErrorIs(t, err, jsonrpc.ErrInvalidParams)
			assert.Nil(t, o)
			return
		}
		require.NotNil(t, o)
		again, err := mcp.ParseObject(o.Raw())
		require.NoError(t, err, "Raw of an accepted object parses: %s", o.Raw())
		require.Equal(t, slices.Sorted(maps.Keys(o)), slices.Sorted(maps.Keys(again)))
		for k, v := range o {
			// Raw compacts members and escapes <, >, & and U+2028/9, as
			// encoding/json does: the same text, in another spelling.
			var compact, want bytes.Buffer
			require.NoError(t, json.Compact(&compact, v), "member %q is valid JSON", k)
			json.HTMLEscape(&want, compact.Bytes())
			var got bytes.Buffer
			require.NoError(t, json.Compact(&got, again[k]))
			assert.Equal(t, want.String(), got.String(), "member %q survives a round trip", k)
		}

		_ = o.Meta()
		_, _ = o.String("name")
		_, _ = o.RequireString("name")
		before := maps.Clone(o)
		o.SetMeta("fuzz/key", 42)
		v, ok := o.MetaValue("fuzz/key")
		require.True(t, ok)
		assert.Equal(t, "42", string(v))
		for k := range before {
			if k != "_meta" {
				assert.Equal(t, before[k], o[k], "SetMeta leaves %q alone", k)
			}
		}
		if m, err := mcp.ParseObject(before["_meta"]); err == nil && len(before["_meta"]) > 0 {
			for k, v := range m {
				if k != "fuzz/key" {
					assert.Equal(t, v, o.Meta()[k], "SetMeta keeps _meta member %q", k)
				}
			}
		}
		o.DeleteMeta("fuzz/key")
		_, ok = o.MetaValue("fuzz/key")
		assert.False(t, ok)
		_, err = mcp.ParseObject(o.Raw())
		assert.NoError(t, err)
	})
}

// FuzzWithoutMeta holds WithoutMeta (one pass, no decoding) to what
// encoding/json makes of the same params: the members of _meta that drop
// picks are gone, and _meta too when nothing is left of it; every other
// member is as it was; params without anything to drop come back as they
// are.
func FuzzWithoutMeta(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"a":1}`, `{"_meta":{}}`, `{"_meta":5}`, `{"_meta":null}`,
		`{"name":"t","_meta":{"x/a":1,"progressToken":"p"},"arguments":{"_meta":{"x/b":2}}}`,
		`{"_meta":{"x/a":1},"name":"t"}`, `{"_meta":{"x/a":[{}],"x/b":"}"}}`,
		` { "_meta" : { "k" : 1 , "x/\u0061" : 2 } } `, `{"\u005fmeta":{"x/a":1}}`,
	} {
		f.Add([]byte(seed))
	}
	drop := func(name []byte) bool { return bytes.HasPrefix(name, []byte("x/")) }
	f.Fuzz(func(t *testing.T, params []byte) {
		out := mcp.WithoutMeta(params, drop)
		var in map[string]any
		if json.Unmarshal(params, &in) != nil || in == nil || duplicateMeta(params) {
			return // the hub passes params that decoded, as objects
		}
		want := maps.Clone(in)
		changed := false
		if meta, ok := in["_meta"].(map[string]any); ok {
			kept := maps.Clone(meta)
			maps.DeleteFunc(kept, func(k string, _ any) bool { return drop([]byte(k)) })
			changed = len(kept) < len(meta)
			want["_meta"] = kept
			if changed && len(kept) == 0 {
				delete(want, "_meta")
			}
		}
		if !changed {
			require.Equal(t, string(params), string(out), "nothing to drop: params as they came")
			return
		}
		var got map[string]any
		require.NoError(t, json.Unmarshal(out, &got), "%s -> %s", params, out)
		assert.Equal(t, want, got, "%s -> %s", params, out)
	})
}

// duplicateMeta reports whether params have _meta more than once, whose
// reading differs between parsers (encoding/json takes the last).
func duplicateMeta(params []byte) bool {
	n := 0
	for name := range jsonrpc.Members(params) {
		if string(name) == "_meta" {
			n++
		}
	}
	return n > 1
}

// simpleExpr is an expression of levels 1 to 3: an optional operator and a
// list of variable names.
var simpleExpr = regexp.MustCompile(`^[+#./;?&]?[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$`)

// expand fills every expression of a well-formed template with one value
// "v", the way RFC 6570 would; ok is false for any other template.
func expand(template string) (string, bool) {
	var b strings.Builder
	rest := template
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return "", false
			}
			b.WriteString(rest)
			return b.String(), true
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 || strings.IndexByte(rest[:open], '}') >= 0 {
			return "", false
		}
		expr := rest[open+1 : open+end]
		if !simpleExpr.MatchString(expr) {
			return "", false
		}
		b.WriteString(rest[:open])
		switch expr[0] {
		case '#', '.', '/':
			b.WriteString(expr[:1] + "v")
		case ';':
			b.WriteString(";x=v")
		case '?', '&':
			b.WriteString(expr[:1] + "x=v")
		default:
			b.WriteString("v")
		}
		rest = rest[open+end+1:]
	}
}

// FuzzURITemplate: ParseURITemplate and Match never panic; a template
// without expressions matches exactly itself; a well-formed template
// matches its own expansion.
func FuzzURITemplate(f *testing.F) {
	for _, seed := range [][2]string{
		{"file:///{name}", "file:///a"},
		{"file:///{+path}", "file:///a/b"},
		{"http://h/p{#frag}", "http://h/p#x"},
		{"file:///f{.ext}", "file:///f.txt"},
		{"http://h{/seg}", "http://h/a/b"},
		{"http://h/m{;x,y}", "http://h/m;x=1"},
		{"http://h/s{?q,lang}", "http://h/s?q=a&lang=b"},
		{"http://h/s?a=1{&x}", "http://h/s?a=1&x=2"},
		{`re://a.b*c+(d)[e]|f^$\g?{x}`, `re://a.b*c+(d)[e]|f^$\g?v`},
		{"{", "{"}, {"}", "}"}, {"{}", ""}, {"a{b{c}d", "aXd"}, {"{{}}", "x}"},
		{"{x:3}", "abc"}, {"{list*}", "a,b"}, {"{=x}", "v"}, {"(?i)A", "a"},
		{"", ""}, {"\xff{x}", "\xffv"}, {"ñ{x}", "ñv"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, template, uri string) {
		tmpl := mcp.ParseURITemplate(template)
		require.NotNil(t, tmpl)
		assert.Equal(t, template, tmpl.String())
		got := tmpl.Match(uri)
		_ = tmpl.Match(template)

		if !strings.Contains(template, "{") {
			assert.True(t, tmpl.Match(template), "%q matches itself", template)
			assert.Equal(t, uri == template, got, "%q is a literal: it matches %q only if equal", template, uri)
			assert.False(t, tmpl.Match(template+"x"), "%q must not match a longer URI", template)
			if template != "" {
				assert.False(t, tmpl.Match(template[1:]), "%q must not match a shorter URI", template)
			}
		}
		if e, ok := expand(template); ok && utf8.ValidString(template) {
			assert.True(t, tmpl.Match(e), "%q should match its expansion %q", template, e)
		}
	})
}

// FuzzServerRequest sends every server method arbitrary params. Whatever
// they hold, the server answers with a result or a client error: never an
// internal error, which is what a handler panic turns into.
func FuzzServerRequest(f *testing.F) {
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{PageSize: 2})
	mcp.AddTypedTool(s, &mcp.Tool{Name: "calc"}, func(ctx context.Context, req *mcp.ToolRequest, args addArgs) (*mcp.CallToolResult, error) {
		return textResult("ok"), req.Progress(ctx, 1, 2, "half")
	})
	s.AddTool(&mcp.Tool{Name: "fails"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("failed")
	})
	s.AddTool(echoTool("a"))
	s.AddTool(echoTool("b"))
	s.AddResource(&mcp.Resource{URI: "mem://a", Name: "a"}, readText("a"))
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://{x}/y", Name: "x"}, readText("x"))
	s.AddPrompt(&mcp.Prompt{Name: "p"}, func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}}, nil
	})
	s.SetCompletionHandler(func(ctx context.Context, ss *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{p.Argument.Value}}}, nil
	})
	serverEnd, clientEnd := peer.Pipe(64)
	ss := s.Serve(context.Background(), serverEnd)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	c, err := mcp.ConnectConn(ctx, clientEnd, nil)
	cancel()
	require.NoError(f, err)
	f.Cleanup(func() {
		c.Close()
		ss.Wait()
	})

	methods := []string{
		mcp.MethodInitialize, mcp.MethodPing, mcp.MethodToolsList, mcp.MethodToolsCall,
		mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead,
		mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe, mcp.MethodPromptsList,
		mcp.MethodPromptsGet, mcp.MethodCompletionComplete, mcp.MethodLoggingSetLevel,
		mcp.NotificationCancelled, mcp.NotificationInitialized, "unknown/method",
	}
	for i, params := range []string{
		`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`,
		`{}`, `{"cursor":"2"}`, `{"name":"calc","arguments":{"a":1,"b":2},"_meta":{"progressToken":5}}`,
		`{"cursor":"-1"}`, `{"cursor":"9999999999999999999999"}`, `{"uri":"mem://z/y"}`,
		`{"uri":"mem://a"}`, `{"uri":null}`, `{"cursor":1}`,
		`{"name":"p","arguments":{"k":"v"}}`, `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}`,
		`{"level":"debug"}`, `{"requestId":1}`, `[]`, `[1,2]`,
	} {
		f.Add(uint8(i), []byte(params))
	}
	f.Add(uint8(3), []byte(`{"name":"fails","arguments":null}`))
	f.Add(uint8(3), []byte(`{"name":"calc","arguments":"x"}`))
	f.Add(uint8(3), []byte(`{"name":"calc","arguments":{"a":1},"_meta":{"progressToken":{"x":[]}}}`))
	f.Add(uint8(12), []byte(`{"level":7}`))

	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		trimmed := bytes.TrimSpace(params)
		if !json.Valid(params) || len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') ||
			bytes.Count(params, []byte("{"))+bytes.Count(params, []byte("[")) > 32 {
			return // not params a client can send in a well-formed request
		}
		method := methods[int(m)%len(methods)]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var res json.RawMessage
		err := c.Peer().Call(ctx, method, json.RawMessage(trimmed), &res)
		require.NoError(t, ctx.Err(), "%s %s was never answered", method, trimmed)
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			assert.NotEqual(t, jsonrpc.CodeInternalError, rpcErr.Code, "%s %s: %v", method, trimmed, err)
		} else {
			require.NoError(t, err, "%s %s", method, trimmed)
			assert.True(t, json.Valid(res), "%s answered invalid JSON", method)
		}
	})
}

// FuzzModernRequest sends requests of protocol version 2026-07-28 with
// arbitrary params: as given (so arbitrary _meta, which ParseRequestMeta
// reads), and with a valid _meta set in them (so arbitrary
// inputResponses, requestState and arguments reach the handlers). The
// server answers with a result carrying resultType, or a client error:
// never an internal error, which is what a handler panic turns into.
func FuzzModernRequest(f *testing.F) {
	s := modernServer(&mcp.ServerOptions{PageSize: 1})
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name"); ok {
			return textResult(r.Action + req.RequestState), nil
		}
		return &mcp.CallToolResult{RequestState: "s", InputRequests: map[string]mcp.InputRequest{
			"name": mcp.ElicitInput(&mcp.ElicitParams{Message: "name?"}),
		}}, nil
	})
	serverEnd, clientEnd := peer.Pipe(64)
	ss := s.Serve(context.Background(), serverEnd)
	p := peer.New(clientEnd, nil)
	p.Start(context.Background())
	f.Cleanup(func() {
		p.Close()
		ss.Wait()
	})

	methods := []string{
		mcp.MethodServerDiscover, mcp.MethodToolsList, mcp.MethodToolsCall, mcp.MethodResourcesList,
		mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead, mcp.MethodPromptsList, mcp.MethodPromptsGet,
		mcp.MethodInitialize, mcp.MethodPing, "unknown/method",
	}
	for i, params := range []string{
		`{}`, `{"cursor":"1"}`, `{"name":"ask","inputResponses":{"name":{"action":"accept"}},"requestState":"s"}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `{"cursor":"x"}`,
		`{"uri":"mem://a","inputResponses":null}`, `{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}`,
		`{"name":"p","requestState":7}`, `{"_meta":[]}`, `{"_meta":{"io.modelcontextprotocol/logLevel":"x"}}`,
	} {
		f.Add(uint8(i), false, []byte(params))
		f.Add(uint8(i), true, []byte(params))
	}
	f.Add(uint8(2), true, []byte(`{"name":"ask","inputResponses":{"name":12345}}`))
	f.Add(uint8(2), true, []byte(`{"name":"ask","inputResponses":[1]}`))

	f.Fuzz(func(t *testing.T, m uint8, withMeta bool, params []byte) {
		raw, ok := objectParams(params)
		if !ok {
			return
		}
		if withMeta {
			obj, err := mcp.ParseObject(raw)
			if err != nil {
				return
			}
			obj.SetMeta(mcp.MetaProtocolVersion, mcp.ModernVersion)
			obj.SetMeta(mcp.MetaClientCapabilities, map[string]any{"elicitation": map[string]any{}})
			raw = obj.Raw()
		} else if !mcp.IsModernRequest(raw) {
			return // a request of a session: FuzzServerRequest's
		}
		modernAnswer(t, p, methods[int(m)%len(methods)], raw)
	})
}

// objectParams returns params trimmed, when they are what a client can
// send in a well-formed request: a JSON object, not too deep.
func objectParams(params []byte) (json.RawMessage, bool) {
	trimmed := bytes.TrimSpace(params)
	if !json.Valid(params) || len(trimmed) == 0 || trimmed[0] != '{' ||
		bytes.Count(params, []byte("{"))+bytes.Count(params, []byte("[")) > 32 {
		return nil, false
	}
	return trimmed, true
}

// modernAnswer sends a request of 2026-07-28 and checks its answer: a
// result carrying resultType, or a client error, never an internal one
// (which is what a handler panic turns into).
func modernAnswer(t *testing.T, p *peer.Peer, method string, params json.RawMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var res json.RawMessage
	err := p.Call(ctx, method, params, &res)
	require.NoError(t, ctx.Err(), "%s %s was never answered", method, params)
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		assert.NotEqual(t, jsonrpc.CodeInternalError, rpcErr.Code, "%s %s: %v", method, params, err)
		return
	}
	require.NoError(t, err, "%s %s", method, params)
	_, ok := jsonrpc.StringMember(res, "resultType")
	assert.True(t, ok, "%s answered without resultType: %s", method, res)
}

// FuzzInputResponse: whatever a client sends as an answer, InputResponse
// never panics, and what it accepts is what its type promises.
func FuzzInputResponse(f *testing.F) {
	for _, s := range []string{
		`{"action":"accept","content":{"a":1}}`, `{"action":"maybe"}`, `{"role":"assistant","content":{"type":"text","text":"x"}}`,
		`{"roots":[{"uri":"file:///"}]}`, `{"roots":null}`, `12345`, `null`, `[]`, `{"role":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		if !json.Valid(answer) {
			return
		}
		responses := map[string]json.RawMessage{"k": answer}
		if r, ok := mcp.InputResponse[mcp.ElicitResult](responses, "k"); ok {
			assert.Contains(t, []string{"accept", "decline", "cancel"}, r.Action)
		}
		if r, ok := mcp.InputResponse[mcp.CreateMessageResult](responses, "k"); ok {
			assert.NotEmpty(t, r.Role)
		}
		if r, ok := mcp.InputResponse[mcp.ListRootsResult](responses, "k"); ok {
			assert.NotNil(t, r.Roots)
		}
		_, ok := mcp.InputResponse[mcp.ElicitResult](responses, "other")
		assert.False(t, ok)
	})
}

// FuzzTaskRequest sends the task methods (tasks/get, tasks/update,
// tasks/cancel) arbitrary params from a client that declared the
// extension, "$ID" in them standing for a real task's id: each is answered
// with a result carrying resultType, or with a client error, never an
// internal one.
func FuzzTaskRequest(f *testing.F) {
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{}})
	slowTool(s, "ask", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name"); ok {
			return textResult(r.Action), nil
		}
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"name": mcp.ElicitInput(&mcp.ElicitParams{Message: "name?"})}}, nil
	})
	serverEnd, clientEnd := peer.Pipe(64)
	ss := s.Serve(context.Background(), serverEnd)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	c, err := mcp.ConnectConn(ctx, clientEnd, &mcp.ClientOptions{Tasks: true, ProtocolVersion: mcp.ModernVersion,
		Elicitation: func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	require.NoError(f, err)
	_, task, err := c.StartTool(ctx, "ask", nil, nil)
	cancel()
	require.NoError(f, err)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		assert.NoError(f, s.Shutdown(ctx))
		c.Close()
		ss.Wait()
	})

	methods := []string{mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel}
	for i, params := range []string{
		`{"taskId":"$ID"}`, `{"taskId":"$ID","inputResponses":{"name":{"action":"accept"}}}`, `{"taskId":"$ID"}`,
		`{"taskId":"nope"}`, `{"taskId":7}`, `{"taskId":null}`, `{}`, `{"taskId":"$ID","inputResponses":[1]}`,
		`{"taskId":"$ID","inputResponses":{"name":12345,"x":null}}`, `{"taskId":["$ID"]}`, `{"taskId":"$ID","_meta":5}`,
	} {
		f.Add(uint8(i), []byte(params))
	}
	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		raw, ok := objectParams(params)
		if !ok {
			return
		}
		raw = modern(t, string(bytes.ReplaceAll(raw, []byte("$ID"), []byte(task.TaskID))), `{"extensions":{"`+mcp.ExtensionTasks+`":{}}}`)
		modernAnswer(t, c.Peer(), methods[int(m)%len(methods)], raw)
	})
}

// FuzzParseRequestMeta: ParseRequestMeta, which reads _meta in one pass
// (and decodes no capabilities that are an empty object), accepts what the
// member-by-member reading accepts, and reads the same from it, for any
// valid JSON params: duplicate members, escaped names and nulls included.
func FuzzParseRequestMeta(f *testing.F) {
	for _, s := range []string{
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{ }},"name":"x"}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/clientCapabilities":{"sampling":5}}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"1","io.modelcontextprotocol/protocolVersion":"2","io.modelcontextprotocol/clientCapabilities":{"extensions":{"a":{}}},"io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"}}`,
		`{"_meta":{"io.modelcontextprotocol\/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":null,"io.modelcontextprotocol/logLevel":null}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}}`,
		`{"_meta":[]}`, `{}`, `[]`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7,"progressToken":"t"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return
		}
		want, wantErr := parseRequestMetaByMember(params)
		got, err := mcp.ParseRequestMeta(params)
		require.Equal(t, wantErr == nil, err == nil, "%s: %v, %v", params, wantErr, err)
		if err != nil {
			assert.Equal(t, wantErr.Error(), err.Error())
			return
		}
		assert.Equal(t, want, got, "%s", params)
	})
}

// parseRequestMetaByMember is ParseRequestMeta as it was, reading each
// member of _meta with a scan of its own and decoding every capabilities
// object: the reference FuzzParseRequestMeta holds it to.
func parseRequestMetaByMember(params json.RawMessage) (*mcp.RequestMeta, error) {
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta is required in protocol version %s", mcp.ModernVersion)
	}
	m := &mcp.RequestMeta{}
	v, ok := jsonrpc.StringMember(meta, mcp.MetaProtocolVersion)
	if !ok || v == "" {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be a protocol version", mcp.MetaProtocolVersion)
	}
	m.ProtocolVersion = v
	caps, ok := jsonrpc.Member(meta, mcp.MetaClientCapabilities)
	if !ok || json.Unmarshal(caps, &m.Capabilities) != nil || len(caps) == 0 || caps[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be an object", mcp.MetaClientCapabilities)
	}
	m.RawCapabilities = caps
	m.ProgressToken, _ = jsonrpc.Member(meta, mcp.MetaProgressToken)
	if info, ok := jsonrpc.Member(meta, mcp.MetaClientInfo); ok && string(info) != "null" {
		m.ClientInfo = &mcp.Implementation{}
		if json.Unmarshal(info, m.ClientInfo) != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be an Implementation", mcp.MetaClientInfo)
		}
	}
	if raw, ok := jsonrpc.Member(meta, mcp.MetaLogLevel); ok && string(raw) != "null" {
		l, ok := jsonrpc.Unquote(raw)
		if !ok || mcp.LoggingLevel(l).Severity() < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be a logging level", mcp.MetaLogLevel)
		}
		m.LogLevel = mcp.LoggingLevel(l)
	}
	return m, nil
}

// FuzzDecorate: Decorate, which reads a result in one pass and adds what
// it lacks in one copy, answers what setting each member in turn answered,
// for any valid JSON result.
func FuzzDecorate(f *testing.F) {
	for _, s := range []string{`{}`, ` { } `, `{"a":1}`, `{"resultType":"input_required"}`, `{"resultType":5,"ttlMs":3}`,
		`{"cacheScope":"public","resultType":"complete","resultType":"task"}`, `[]`, `null`, `"x"`} {
		f.Add([]byte(s), int64(-1))
		f.Add([]byte(s), int64(60000))
	}
	f.Fuzz(func(t *testing.T, result []byte, ttl int64) {
		if !json.Valid(result) {
			return
		}
		want := decorateBySetMember(result, ttl, mcp.CachePrivate)
		assert.Equal(t, string(want), string(mcp.Decorate(result, ttl, mcp.CachePrivate)), "%s", result)
	})
}

// decorateBySetMember is Decorate as it was: the reference FuzzDecorate
// holds it to.
func decorateBySetMember(result json.RawMessage, ttl int64, scope string) json.RawMessage {
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	var hasType, hasTTL, hasScope bool
	for key := range jsonrpc.Members(result) {
		switch string(key) {
		case "resultType":
			hasType = true
		case "ttlMs":
			hasTTL = true
		case "cacheScope":
			hasScope = true
		}
	}
	out := result
	set := func(key string, value []byte) {
		if b, err := jsonrpc.SetMember(out, key, value); err == nil {
			out = b
		}
	}
	if !hasType {
		set("resultType", []byte(`"`+mcp.ResultComplete+`"`))
	}
	if ttl >= 0 && mcp.ResultTypeOf(out) == mcp.ResultComplete {
		if !hasTTL {
			set("ttlMs", strconv.AppendInt(nil, ttl, 10))
		}
		if !hasScope {
			set("cacheScope", jsonrpc.AppendString(nil, scope))
		}
	}
	return out
}
