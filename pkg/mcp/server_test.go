package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

var testInfo = mcp.Implementation{Name: "test-server", Version: "1.2.3"}

func echoTool(name string) (*mcp.Tool, mcp.ToolHandler) {
	return &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return textResult(name), nil
	}
}

func readText(text string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: text}}}, nil
	}
}

func TestServer_initialize(t *testing.T) {
	t.Parallel()
	noCompletion := func(ctx context.Context, s *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{}, nil
	}
	tests := []struct {
		name     string
		register func(s *mcp.Server)
		want     mcp.ServerCapabilities
	}{
		{"nothing", func(*mcp.Server) {}, mcp.ServerCapabilities{Logging: &struct{}{}}},
		{
			"tool",
			func(s *mcp.Server) { s.AddTool(echoTool("t")) },
			mcp.ServerCapabilities{Logging: &struct{}{}, Tools: &mcp.ListChangedCap{ListChanged: true}},
		},
		{
			"resource",
			func(s *mcp.Server) { s.AddResource(&mcp.Resource{URI: "mem://a", Name: "a"}, readText("a")) },
			mcp.ServerCapabilities{Logging: &struct{}{}, Resources: &mcp.ResourcesCap{Subscribe: true, ListChanged: true}},
		},
		{
			"template only",
			func(s *mcp.Server) {
				s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://{x}", Name: "x"}, readText("x"))
			},
			mcp.ServerCapabilities{Logging: &struct{}{}, Resources: &mcp.ResourcesCap{Subscribe: true, ListChanged: true}},
		},
		{
			"prompt",
			func(s *mcp.Server) { s.AddPrompt(&mcp.Prompt{Name: "p"}, nil) },
			mcp.ServerCapabilities{Logging: &struct{}{}, Prompts: &mcp.ListChangedCap{ListChanged: true}},
		},
		{
			"completion",
			func(s *mcp.Server) { s.SetCompletionHandler(noCompletion) },
			mcp.ServerCapabilities{Logging: &struct{}{}, Completions: &struct{}{}},
		},
		{
			"tool removed again",
			func(s *mcp.Server) { s.AddTool(echoTool("t")); s.RemoveTool("t") },
			mcp.ServerCapabilities{Logging: &struct{}{}},
		},
		{
			"everything",
			func(s *mcp.Server) {
				s.AddTool(echoTool("t"))
				s.AddResource(&mcp.Resource{URI: "mem://a", Name: "a"}, readText("a"))
				s.AddPrompt(&mcp.Prompt{Name: "p"}, nil)
				s.SetCompletionHandler(noCompletion)
			},
			mcp.ServerCapabilities{
				Logging:     &struct{}{},
				Tools:       &mcp.ListChangedCap{ListChanged: true},
				Resources:   &mcp.ResourcesCap{Subscribe: true, ListChanged: true},
				Prompts:     &mcp.ListChangedCap{ListChanged: true},
				Completions: &struct{}{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mcp.NewServer(testInfo, &mcp.ServerOptions{Instructions: "use it well"})
			tt.register(s)
			c, _ := connect(t, s, nil)
			init := c.InitializeResult()
			assert.Equal(t, tt.want, init.Capabilities)
			assert.Equal(t, testInfo, init.ServerInfo)
			assert.Equal(t, "use it well", init.Instructions)
			assert.Equal(t, mcp.LatestVersion, init.ProtocolVersion)
		})
	}
}

func TestServer_initializeVersionAndClientInfo(t *testing.T) {
	t.Parallel()
	tests := []struct{ asked, want string }{
		{mcp.Version20241105, mcp.Version20241105},
		{mcp.Version20250618, mcp.Version20250618},
		{"1999-01-01", mcp.LatestVersion},
	}
	for _, tt := range tests {
		t.Run(tt.asked, func(t *testing.T) {
			t.Parallel()
			s := mcp.NewServer(testInfo, nil)
			c, ss := connect(t, s, &mcp.ClientOptions{
				ProtocolVersion: tt.asked,
				Info:            mcp.Implementation{Name: "tester", Version: "9"},
				Roots:           func(context.Context) ([]mcp.Root, error) { return nil, nil },
			})
			assert.Equal(t, tt.want, c.InitializeResult().ProtocolVersion)
			caps := ss.ClientCapabilities()
			assert.Nil(t, caps.Sampling)
			assert.Nil(t, caps.Elicitation)
			assert.Equal(t, &mcp.ListChangedCap{ListChanged: true}, caps.Roots)
			require.NoError(t, c.Ping(testCtx(t)))
		})
	}
}

type addArgs struct {
	A  int    `json:"a"`
	B  int    `json:"b"`
	Op string `json:"op,omitempty" enum:"add,sub"`
}

func TestAddTypedTool(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	mcp.AddTypedTool(s, &mcp.Tool{Name: "calc"}, func(ctx context.Context, req *mcp.ToolRequest, args addArgs) (*mcp.CallToolResult, error) {
		if args.Op == "sub" {
			return textResult(strconv.Itoa(args.A - args.B)), nil
		}
		return textResult(strconv.Itoa(args.A + args.B)), nil
	})
	c, _ := connect(t, s, nil)

	tools, err := c.AllTools(testCtx(t))
	require.NoError(t, err)
	require.Len(t, tools, 1)
	assert.JSONEq(t, string(mcp.SchemaFor[addArgs]()), string(tools[0].InputSchema), "the schema is derived from the arguments type")

	tests := []struct {
		name     string
		args     any
		want     string
		wantCode jsonrpc.Code
	}{
		{name: "decoded", args: map[string]any{"a": 2, "b": 3}, want: "5"},
		{name: "struct arguments", args: addArgs{A: 7, B: 2, Op: "sub"}, want: "5"},
		{name: "unknown members are ignored", args: map[string]any{"a": 1, "b": 1, "zzz": true}, want: "2"},
		{name: "no arguments decode to zero", args: nil, want: "0"},
		{name: "explicit null", args: json.RawMessage(`null`), want: "0"},
		{name: "wrong member type", args: map[string]any{"a": "two"}, wantCode: jsonrpc.CodeInvalidParams},
		{name: "fractional integer", args: map[string]any{"a": 1.5}, wantCode: jsonrpc.CodeInvalidParams},
		{name: "not an object", args: json.RawMessage(`[1,2]`), wantCode: jsonrpc.CodeInvalidParams},
		{name: "a string", args: json.RawMessage(`"a=1"`), wantCode: jsonrpc.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := c.CallTool(testCtx(t), "calc", tt.args, nil)
			if tt.wantCode != 0 {
				require.Error(t, err)
				assert.Equal(t, tt.wantCode, rpcCode(t, err))
				assert.Contains(t, err.Error(), "calc", "the error names the tool")
				return
			}
			require.NoError(t, err)
			assert.False(t, res.IsError)
			assert.Equal(t, tt.want, text(res))
		})
	}
}

func TestAddTypedTool_keepsExplicitSchema(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}`)
	mcp.AddTypedTool(s, &mcp.Tool{Name: "calc", InputSchema: schema}, func(ctx context.Context, req *mcp.ToolRequest, args addArgs) (*mcp.CallToolResult, error) {
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "untyped"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	c, _ := connect(t, s, nil)
	tools, err := c.AllTools(testCtx(t))
	require.NoError(t, err)
	require.Len(t, tools, 2)
	assert.JSONEq(t, string(schema), string(tools[0].InputSchema))
	assert.JSONEq(t, `{"type":"object"}`, string(tools[1].InputSchema), "a tool without a schema gets an empty object schema")

	res, err := c.CallTool(testCtx(t), "untyped", nil, nil)
	require.NoError(t, err)
	assert.NotNil(t, res.Content, "a nil result is sent with empty content")
	assert.Empty(t, res.Content)
}

func TestServer_toolErrors(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	protocolErr := &jsonrpc.Error{Code: -32042, Message: "quota exceeded", Data: json.RawMessage(`{"retry":3}`)}
	handlers := map[string]error{
		"plain":            errors.New("the disk is full"),
		"wrapped":          fmt.Errorf("opening: %w", errors.New("no such file")),
		"protocol":         protocolErr,
		"wrapped-protocol": fmt.Errorf("calling upstream: %w", protocolErr),
		"not-found":        mcp.ErrResourceNotFound,
	}
	for name, herr := range handlers {
		s.AddTool(&mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return textResult("ignored"), herr
		})
	}
	c, _ := connect(t, s, nil)

	tests := []struct {
		tool     string
		wantText string         // for a result with isError
		wantErr  *jsonrpc.Error // for a protocol error
	}{
		{tool: "plain", wantText: "the disk is full"},
		{tool: "wrapped", wantText: "opening: no such file"},
		{tool: "protocol", wantErr: protocolErr},
		{tool: "wrapped-protocol", wantErr: protocolErr},
		{tool: "not-found", wantErr: mcp.ErrResourceNotFound},
		{tool: "nope", wantErr: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `Invalid params: unknown tool "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			res, err := c.CallTool(testCtx(t), tt.tool, map[string]any{}, nil)
			if tt.wantErr != nil {
				require.Error(t, err)
				var got *jsonrpc.Error
				require.ErrorAs(t, err, &got)
				assert.Equal(t, tt.wantErr.Code, got.Code)
				assert.Equal(t, tt.wantErr.Message, got.Message)
				if tt.wantErr.Data != nil {
					assert.JSONEq(t, string(tt.wantErr.Data), string(got.Data))
				}
				return
			}
			require.NoError(t, err, "a tool's own failure is a result, not a protocol error")
			assert.True(t, res.IsError)
			require.Len(t, res.Content, 1)
			assert.Equal(t, "text", res.Content[0].Type)
			assert.Equal(t, tt.wantText, res.Content[0].Text)
		})
	}
}

func TestServer_pagination(t *testing.T) {
	t.Parallel()
	const n = 7
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{PageSize: 3})
	var want []string
	for i := range n {
		name := fmt.Sprintf("item-%d", i)
		want = append(want, name)
		s.AddTool(echoTool(name))
		s.AddResource(&mcp.Resource{URI: "mem://" + name, Name: name}, readText(name))
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "tmpl://" + name + "/{x}", Name: name}, readText(name))
		s.AddPrompt(&mcp.Prompt{Name: name}, nil)
	}
	s.AddTool(echoTool("item-0")) // replacing keeps one tool of that name, moved to the end
	c, _ := connect(t, s, nil)
	ctx := testCtx(t)

	page, err := c.ListTools(ctx, "")
	require.NoError(t, err)
	assert.Len(t, page.Tools, 3)
	assert.Equal(t, "3", page.NextCursor)
	page, err = c.ListTools(ctx, page.NextCursor)
	require.NoError(t, err)
	assert.Len(t, page.Tools, 3)
	page, err = c.ListTools(ctx, page.NextCursor)
	require.NoError(t, err)
	assert.Len(t, page.Tools, 1)
	assert.Empty(t, page.NextCursor, "the last page has no cursor")

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Equal(t, append(want[1:], "item-0"), mapNames(tools, func(t *mcp.Tool) string { return t.Name }))

	resources, err := c.AllResources(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, mapNames(resources, func(r *mcp.Resource) string { return r.Name }))

	templates, err := c.AllResourceTemplates(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, mapNames(templates, func(r *mcp.ResourceTemplate) string { return r.Name }))

	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, mapNames(prompts, func(p *mcp.Prompt) string { return p.Name }))

	for _, cursor := range []string{"x", "-1", "8", "1.5"} {
		_, err := c.ListTools(ctx, cursor)
		require.Error(t, err, "cursor %q", cursor)
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err), "cursor %q", cursor)
	}
	page, err = c.ListTools(ctx, "7")
	require.NoError(t, err, "the cursor just past the end gives an empty page")
	assert.Empty(t, page.Tools)
}

func TestServer_paginationOff(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	for i := range 50 {
		s.AddTool(echoTool(fmt.Sprint(i)))
	}
	c, _ := connect(t, s, nil)
	page, err := c.ListTools(testCtx(t), "")
	require.NoError(t, err)
	assert.Len(t, page.Tools, 50, "PageSize 0 sends everything at once")
	assert.Empty(t, page.NextCursor)

	empty, err := c.ListPrompts(testCtx(t), "")
	require.NoError(t, err)
	assert.NotNil(t, empty.Prompts)
	assert.Empty(t, empty.Prompts)
}

func mapNames[T any](xs []T, name func(T) string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, name(x))
	}
	return out
}

func TestServer_readResource(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddResource(&mcp.Resource{URI: "file:///readme.md", Name: "readme"}, readText("exact"))
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///{name}", Name: "files"}, readText("template"))
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "db://{table}/rows{?limit}", Name: "rows"}, readText("rows"))
	s.AddResource(&mcp.Resource{URI: "mem://fails", Name: "fails"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, jsonrpc.NewError(-32010, "backend down")
	})
	c, _ := connect(t, s, nil)

	tests := []struct {
		uri      string
		want     string
		wantCode jsonrpc.Code
	}{
		{uri: "file:///readme.md", want: "exact"},
		{uri: "file:///other.md", want: "template"},
		{uri: "db://users/rows", want: "rows"},
		{uri: "db://users/rows?limit=5", want: "rows"},
		{uri: "file:///dir/other.md", wantCode: mcp.CodeResourceNotFound},
		{uri: "mem://nope", wantCode: mcp.CodeResourceNotFound},
		{uri: "", wantCode: mcp.CodeResourceNotFound},
		{uri: "mem://fails", wantCode: -32010},
	}
	t.Run("read", func(t *testing.T) { // parallel subtests end before the removal below
		for _, tt := range tests {
			t.Run(tt.uri, func(t *testing.T) {
				t.Parallel()
				res, err := c.ReadResource(testCtx(t), tt.uri)
				if tt.wantCode != 0 {
					require.Error(t, err)
					assert.Equal(t, tt.wantCode, rpcCode(t, err))
					if tt.wantCode == mcp.CodeResourceNotFound {
						assert.ErrorIs(t, err, mcp.ErrResourceNotFound)
						var e *jsonrpc.Error
						require.ErrorAs(t, err, &e)
						assert.JSONEq(t, fmt.Sprintf(`{"uri":%q}`, tt.uri), string(e.Data), "the error names the URI")
					}
					return
				}
				require.NoError(t, err)
				require.Len(t, res.Contents, 1)
				assert.Equal(t, tt.want, res.Contents[0].Text)
				assert.Equal(t, tt.uri, res.Contents[0].URI, "the handler sees the URI read")
			})
		}
	})

	s.RemoveResource("file:///readme.md")
	res, err := c.ReadResource(testCtx(t), "file:///readme.md")
	require.NoError(t, err)
	assert.Equal(t, "template", res.Contents[0].Text, "once removed, the template serves it")
}

func TestServer_subscribe(t *testing.T) {
	t.Parallel()
	const uri = "mem://watched"
	s := mcp.NewServer(testInfo, nil)
	s.AddResource(&mcp.Resource{URI: uri, Name: "watched"}, readText("x"))
	notes1, on1 := notifications(t)
	notes2, on2 := notifications(t)
	c1, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on1})
	_, _ = connect(t, s, &mcp.ClientOptions{OnNotification: on2})
	ctx := testCtx(t)

	require.NoError(t, c1.Subscribe(ctx, uri))
	s.ResourceUpdated(ctx, uri)
	s.ResourceUpdated(ctx, "mem://other")

	got := barrier(t, s, notes1)
	require.Equal(t, []string{mcp.NotificationResourceUpdated}, methods(got), "the subscriber hears of its resource only")
	var p mcp.ResourceUpdatedParams
	require.NoError(t, json.Unmarshal(got[0].params, &p))
	assert.Equal(t, uri, p.URI)
	assert.Empty(t, barrier(t, s, notes2), "a client that did not subscribe hears nothing")

	require.NoError(t, c1.Unsubscribe(ctx, uri))
	s.ResourceUpdated(ctx, uri)
	assert.Empty(t, barrier(t, s, notes1), "nothing after unsubscribing")
	assert.Empty(t, barrier(t, s, notes2))
}

func TestServer_prompts(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddPrompt(&mcp.Prompt{
		Name:      "greet",
		Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}},
	}, func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
		name, ok := req.Params.Arguments["name"]
		if !ok {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "name is required")
		}
		return &mcp.GetPromptResult{
			Description: "a greeting",
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("Say hello to " + name)}},
		}, nil
	})
	c, _ := connect(t, s, nil)
	ctx := testCtx(t)

	res, err := c.GetPrompt(ctx, "greet", map[string]string{"name": "Ada"})
	require.NoError(t, err)
	assert.Equal(t, "a greeting", res.Description)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "user", res.Messages[0].Role)
	assert.Equal(t, "Say hello to Ada", res.Messages[0].Content.Text)

	_, err = c.GetPrompt(ctx, "greet", nil)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err), "the handler's error")

	_, err = c.GetPrompt(ctx, "nope", nil)
	require.Error(t, err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err))
	assert.Contains(t, err.Error(), `"nope"`)

	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	require.Len(t, prompts, 1)
	assert.Equal(t, []*mcp.PromptArgument{{Name: "name", Required: true}}, prompts[0].Arguments)
}

func TestServer_completion(t *testing.T) {
	t.Parallel()
	params := &mcp.CompleteParams{
		Ref:      mcp.CompleteRef{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteArgument{Name: "name", Value: "A"},
		Context:  &mcp.CompleteContext{Arguments: map[string]string{"lang": "en"}},
	}

	t.Run("no handler", func(t *testing.T) {
		t.Parallel()
		c, _ := connect(t, mcp.NewServer(testInfo, nil), nil)
		res, err := c.Complete(testCtx(t), params)
		require.NoError(t, err)
		assert.NotNil(t, res.Completion.Values)
		assert.Empty(t, res.Completion.Values)
	})

	t.Run("handler", func(t *testing.T) {
		t.Parallel()
		s := mcp.NewServer(testInfo, nil)
		got := make(chan *mcp.CompleteParams, 1)
		s.SetCompletionHandler(func(ctx context.Context, ss *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
			got <- p
			return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{"Ada", "Alan"}, Total: 5, HasMore: true}}, nil
		})
		c, _ := connect(t, s, nil)
		res, err := c.Complete(testCtx(t), params)
		require.NoError(t, err)
		assert.Equal(t, mcp.Completion{Values: []string{"Ada", "Alan"}, Total: 5, HasMore: true}, res.Completion)
		assert.Equal(t, params, recv(t, got))
	})
}

func TestServer_logging(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	notes, on := notifications(t)
	c, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on})
	ctx := testCtx(t)
	all := []mcp.LoggingLevel{
		mcp.LevelDebug, mcp.LevelInfo, mcp.LevelNotice, mcp.LevelWarning,
		mcp.LevelError, mcp.LevelCritical, mcp.LevelAlert, mcp.LevelEmergency,
	}
	logAll := func() []mcp.LoggingLevel {
		for _, l := range all {
			s.Log(ctx, l, "app", map[string]any{"level": string(l)})
		}
		var got []mcp.LoggingLevel
		for _, n := range barrier(t, s, notes) {
			require.Equal(t, mcp.NotificationMessage, n.method)
			var p mcp.LoggingMessageParams
			require.NoError(t, json.Unmarshal(n.params, &p))
			assert.Equal(t, "app", p.Logger)
			assert.Equal(t, map[string]any{"level": string(p.Level)}, p.Data)
			got = append(got, p.Level)
		}
		return got
	}

	assert.Equal(t, all, logAll(), "every level before logging/setLevel")

	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelWarning))
	assert.Equal(t, all[3:], logAll(), "warning and above")

	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelEmergency))
	assert.Equal(t, all[7:], logAll())

	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelDebug))
	assert.Equal(t, all, logAll())

	err := c.SetLoggingLevel(ctx, "verbose")
	require.Error(t, err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err))
	assert.Equal(t, all, logAll(), "an unknown level changes nothing")
}

func TestToolRequest_Log(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "chatty"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		req.Log(ctx, mcp.LevelDebug, "tool", "debug detail")
		req.Log(ctx, mcp.LevelError, "tool", "it broke")
		return textResult("ok"), nil
	})
	notes, on := notifications(t)
	c, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on})
	ctx := testCtx(t)
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelInfo))
	_, err := c.CallTool(ctx, "chatty", nil, nil)
	require.NoError(t, err)
	got := barrier(t, s, notes)
	require.Len(t, got, 1, "only the error passes the info level")
	var p mcp.LoggingMessageParams
	require.NoError(t, json.Unmarshal(got[0].params, &p))
	assert.Contains(t, p.Meta, mcp.MetaRelatedRequest, "the line names its call")
	p.Meta = nil
	assert.Equal(t, mcp.LoggingMessageParams{Level: mcp.LevelError, Logger: "tool", Data: "it broke"}, p)
}

func TestClient_progress(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	served := make(chan *mcp.ToolRequest, 2)
	s.AddTool(&mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Progress(ctx, float64(i), 3, fmt.Sprintf("step %d", i)); err != nil {
				return nil, err
			}
		}
		served <- req
		return textResult("done"), nil
	})
	notes, on := notifications(t)
	c, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on})
	ctx := testCtx(t)

	var (
		mu      sync.Mutex
		reports []mcp.ProgressParams
	)
	res, err := c.CallTool(ctx, "slow", nil, &mcp.CallOptions{
		Meta: mcp.Meta{"trace": "t1"},
		Progress: func(p *mcp.ProgressParams) {
			mu.Lock()
			reports = append(reports, *p)
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
	req := recv(t, served)
	assert.Equal(t, "t1", req.Params.Meta["trace"], "CallOptions.Meta reaches the server")
	token := req.Params.Meta[mcp.MetaProgressToken]
	require.NotNil(t, token, "the call asked for progress")

	mu.Lock()
	got := append([]mcp.ProgressParams(nil), reports...)
	mu.Unlock()
	require.Len(t, got, 3, "reports sent before the answer arrive before CallTool returns")
	for i, p := range got {
		assert.Equal(t, token, p.ProgressToken)
		assert.Equal(t, float64(i+1), p.Progress)
		assert.Equal(t, float64(3), p.Total)
		assert.Equal(t, fmt.Sprintf("step %d", i+1), p.Message)
	}
	for _, n := range barrier(t, s, notes) {
		assert.Equal(t, mcp.NotificationProgress, n.method, "OnNotification sees progress too")
	}

	// A report for the finished call reaches the client but not the callback:
	// its token was dropped when CallTool returned.
	require.NoError(t, req.Progress(ctx, 4, 3, "late"))
	assert.Equal(t, []string{mcp.NotificationProgress}, methods(barrier(t, s, notes)))
	mu.Lock()
	assert.Len(t, reports, 3, "no report after the call returned")
	mu.Unlock()

	// Without CallOptions.Progress, the tool's reports are not sent at all.
	_, err = c.CallTool(ctx, "slow", nil, nil)
	require.NoError(t, err)
	req = recv(t, served)
	assert.Nil(t, req.Params.Meta)
	assert.Empty(t, barrier(t, s, notes), "no progress token, no progress notifications")
}

func TestClient_cancel(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	started := make(chan struct{})
	stopped := make(chan error, 1)
	s.AddTool(&mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return textResult("too late"), nil
	})
	notes, on := notifications(t)
	c, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on})

	ctx, cancel := context.WithCancel(testCtx(t))
	called := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "block", nil, nil)
		called <- err
	}()
	recv(t, started)
	cancel()
	assert.ErrorIs(t, recv(t, called), context.Canceled, "the call returns at once")
	assert.ErrorIs(t, recv(t, stopped), context.Canceled, "notifications/cancelled cancels the handler's context")

	// The session goes on.
	require.NoError(t, c.Ping(testCtx(t)))
	assert.Empty(t, barrier(t, s, notes))
}

// tapConn passes frames through and copies those it reads to a channel.
type tapConn struct {
	peer.Conn
	read chan []byte
}

func (c *tapConn) Read(ctx context.Context) ([]byte, error) {
	b, err := c.Conn.Read(ctx)
	if err == nil {
		select {
		case c.read <- append([]byte(nil), b...):
		default:
		}
	}
	return b, err
}

// requestMeta returns the _meta of the first request for method among the
// frames the tap has read.
func requestMeta(t *testing.T, tap *tapConn, method string) mcp.Object {
	t.Helper()
	for {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		frame := recv(t, tap.read)
		if json.Unmarshal(frame, &m) != nil || m.Method != method || m.ID == nil {
			continue
		}
		p, err := mcp.ParseObject(m.Params)
		require.NoError(t, err)
		return p.Meta()
	}
}

func TestToolRequest_clientRequests(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	userMeta := mcp.Meta{"vendor/trace": "abc"}
	ids := make(chan jsonrpc.ID, 1)
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		ids <- req.ID
		msg, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("2+2?")}},
			MaxTokens: 10,
			Meta:      userMeta,
		})
		if err != nil {
			return nil, err
		}
		el, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "your name?", RequestedSchema: mcp.SchemaFor[struct {
			Name string `json:"name"`
		}]()})
		if err != nil {
			return nil, err
		}
		roots, err := req.ListRoots(ctx)
		if err != nil {
			return nil, err
		}
		return textResult(fmt.Sprintf("%s/%s/%v/%s", msg.Content.Text, el.Action, el.Content["name"], roots.Roots[0].URI)), nil
	})

	sampled := make(chan *mcp.CreateMessageParams, 1)
	elicited := make(chan *mcp.ElicitParams, 1)
	serverEnd, clientEnd := peer.Pipe(64)
	tap := &tapConn{Conn: clientEnd, read: make(chan []byte, 64)}
	c, ss := connectConn(t, s, serverEnd, tap, &mcp.ClientOptions{
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			sampled <- p
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("4"), Model: "m"}, nil
		},
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			elicited <- p
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		Roots: func(ctx context.Context) ([]mcp.Root, error) {
			return []mcp.Root{{URI: "file:///work", Name: "work"}}, nil
		},
	})
	caps := ss.ClientCapabilities()
	assert.NotNil(t, caps.Sampling, "a client with a sampling handler declares it")
	assert.Equal(t, &mcp.ElicitationCap{Form: &struct{}{}}, caps.Elicitation)
	assert.Equal(t, &mcp.ListChangedCap{ListChanged: true}, caps.Roots)

	// Call with an id of our choosing, to compare it with what the client's
	// handlers are told.
	id := c.Peer().NextID()
	var res mcp.CallToolResult
	require.NoError(t, c.Peer().CallID(testCtx(t), id, mcp.MethodToolsCall, &mcp.CallToolParams{Name: "ask"}, &res))
	assert.Equal(t, "4/accept/Ada/file:///work", text(&res))
	assert.Equal(t, id, recv(t, ids), "ToolRequest.ID is the id the server received")

	related := func(m mcp.Meta) string {
		b, err := json.Marshal(m[mcp.MetaRelatedRequest])
		require.NoError(t, err)
		return string(b)
	}
	sp := recv(t, sampled)
	assert.Equal(t, id.String(), related(sp.Meta), "sampling carries the related request")
	assert.Equal(t, "abc", sp.Meta["vendor/trace"], "the caller's _meta is kept")
	assert.Equal(t, mcp.Meta{"vendor/trace": "abc"}, userMeta, "the caller's _meta is not modified")
	assert.Equal(t, 10, sp.MaxTokens)
	assert.Equal(t, id.String(), related(recv(t, elicited).Meta), "elicitation carries the related request")

	// The roots handler does not see params: check the wire.
	for _, method := range []string{mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate, mcp.MethodRootsList} {
		v, ok := requestMeta(t, tap, method)[mcp.MetaRelatedRequest]
		if assert.True(t, ok, "%s has _meta[%s]", method, mcp.MetaRelatedRequest) {
			assert.Equal(t, id.String(), string(v), method)
		}
	}
}

func TestToolRequest_clientWithoutHandlers(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		_, e1 := req.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1})
		_, e2 := req.Elicit(ctx, &mcp.ElicitParams{Message: "?"})
		_, e3 := req.ListRoots(ctx)
		return textResult(fmt.Sprint(jsonrpc.CodeOf(e1), jsonrpc.CodeOf(e2), jsonrpc.CodeOf(e3))), nil
	})
	c, ss := connect(t, s, nil)
	assert.Equal(t, mcp.ClientCapabilities{}, ss.ClientCapabilities(), "nothing declared")
	res, err := c.CallTool(testCtx(t), "ask", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "-32601 -32601 -32601", text(res), "sampling, elicitation and roots answer method not found")
}

func TestServer_listChanged(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	notes, on := notifications(t)
	c, _ := connect(t, s, &mcp.ClientOptions{OnNotification: on})
	ctx := testCtx(t)

	tests := []struct {
		name   string
		change func()
		want   string
	}{
		{"add tool", func() { s.AddTool(echoTool("a")) }, mcp.NotificationToolsListChanged},
		{"replace tool", func() { s.AddTool(echoTool("a")) }, mcp.NotificationToolsListChanged},
		{"remove tool", func() { s.RemoveTool("a") }, mcp.NotificationToolsListChanged},
		{"add resource", func() { s.AddResource(&mcp.Resource{URI: "mem://r", Name: "r"}, readText("r")) }, mcp.NotificationResourcesListChanged},
		{"add template", func() {
			s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://{x}", Name: "x"}, readText("x"))
		}, mcp.NotificationResourcesListChanged},
		{"remove resource", func() { s.RemoveResource("mem://r") }, mcp.NotificationResourcesListChanged},
		{"add prompt", func() { s.AddPrompt(&mcp.Prompt{Name: "p"}, nil) }, mcp.NotificationPromptsListChanged},
		{"remove prompt", func() { s.RemovePrompt("p") }, mcp.NotificationPromptsListChanged},
	}
	for _, tt := range tests { // in order: each step changes the server
		tt.change()
		assert.Equal(t, []string{tt.want}, methods(barrier(t, s, notes)), tt.name)
	}

	s.AddTool(echoTool("b"))
	barrier(t, s, notes)
	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, mapNames(tools, func(t *mcp.Tool) string { return t.Name }), "the list reflects the change")

	s.SetCompletionHandler(nil)
	assert.Empty(t, barrier(t, s, notes), "the completion handler has no list")
}

func TestServer_rootsChanged(t *testing.T) {
	t.Parallel()
	changed := make(chan *mcp.ServerSession, 1)
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{OnRootsChanged: func(ss *mcp.ServerSession) { changed <- ss }})
	c, ss := connect(t, s, &mcp.ClientOptions{Roots: func(context.Context) ([]mcp.Root, error) { return nil, nil }})
	require.NoError(t, c.NotifyRootsChanged(testCtx(t)))
	assert.Same(t, ss, recv(t, changed))
}

func TestServer_unknownMethod(t *testing.T) {
	t.Parallel()
	c, _ := connect(t, mcp.NewServer(testInfo, nil), nil)
	err := c.Peer().Call(testCtx(t), "tools/frobnicate", nil, nil)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(t, err))
	err = c.Peer().Call(testCtx(t), mcp.MethodToolsCall, json.RawMessage(`{"name":5}`), nil)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err), "params that do not decode")
	require.NoError(t, c.Peer().Notify(testCtx(t), "notifications/unknown", nil), "unknown notifications are ignored")
	require.NoError(t, c.Ping(testCtx(t)))
}

func TestClient_closedServer(t *testing.T) {
	t.Parallel()
	c, ss := connect(t, mcp.NewServer(testInfo, nil), nil)
	require.NoError(t, ss.Close())
	recv(t, c.Done())
	err := c.Ping(testCtx(t))
	require.Error(t, err)
	assert.ErrorIs(t, err, peer.ErrClosed)
	assert.ErrorIs(t, err, mcp.ErrConnectionClosed, "the same code as MCP's connection closed")
}

func TestServer_sessionEndsWhenClientCloses(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	c, ss := connect(t, s, nil)
	require.NoError(t, c.Close())
	assert.NoError(t, ss.Wait(), "a client's normal close ends the session without error")
	recv(t, ss.Peer().Done())
	s.Log(testCtx(t), mcp.LevelInfo, "app", "nobody listens") // must not block or panic
	s.ResourceUpdated(testCtx(t), "mem://x")
}

// A server behind a hub serves every client of the hub on one connection:
// it takes the calls of 64 clients with 16 in flight each beside the
// subscriptions/listen stream the hub keeps open (which holds one request
// for as long as it is open), where it took 1,024 requests in all.
func TestServer_takesAHubsCallsBesideItsListenStream(t *testing.T) {
	t.Parallel()
	const calls = 64*16 + 1
	admitted := make(chan *mcp.ServerSession, 1)
	s := mcp.NewServer(testInfo, &mcp.ServerOptions{OnRootsChanged: func(ss *mcp.ServerSession) { admitted <- ss }})
	release := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return textResult("done"), nil
	})
	c, _ := connect(t, s, &mcp.ClientOptions{Roots: func(context.Context) ([]mcp.Root, error) { return nil, nil }})

	answers := make(chan *jsonrpc.Response, calls)
	params := json.RawMessage(`{"name":"wait"}`)
	for range calls {
		require.NoError(t, c.Peer().Go(c.Peer().NextID(), mcp.MethodToolsCall, params, func(resp *jsonrpc.Response, err error) {
			if assert.NoError(t, err) {
				answers <- resp
			}
		}))
	}
	// The server reads a notification on its read loop, after every call
	// sent before it was admitted or refused.
	require.NoError(t, c.NotifyRootsChanged(testCtx(t)))
	recv(t, admitted)
	close(release)
	for range calls {
		resp := recv(t, answers)
		assert.Nil(t, resp.Error, "call %s", resp.ID)
	}
}

// wsPair returns the two ends of a real WebSocket over loopback: the
// accepted one (a server's, as the hub's would be) and the dialled one.
func wsPair(t *testing.T) (*peer.WebSocket, *peer.WebSocket) {
	t.Helper()
	accepted := make(chan *peer.WebSocket, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ws, err := peer.Accept(w, r, nil); err == nil {
			accepted <- ws
		}
	}))
	t.Cleanup(srv.Close)
	dialed, err := peer.Dial(testCtx(t), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	return recv(t, accepted), dialed
}

// TestServer_lendRequests: a server that lends its requests, served over a
// WebSocket (whose requests are then read into pooled buffers, given back
// once answered), answers each of many 16 KiB tool calls with its own
// arguments; and a task's work, which runs on after the call that made it
// was answered and its buffer read into again, still sees that call's
// arguments.
func TestServer_lendRequests(t *testing.T) {
	t.Parallel()
	s := taskServer(t, &mcp.ServerOptions{LendRequests: true})
	s.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: req.Params.Arguments}, nil
	})
	g := newGate()
	slowTool(s, "slow", g.work)
	serverEnd, clientEnd := wsPair(t)
	opts := answering(nil)
	opts.Tasks = true
	c, _ := connectModernConn(t, s, serverEnd, clientEnd, opts)
	ctx := testCtx(t)
	args := func(i int) map[string]string {
		return map[string]string{"text": strings.Repeat(string(rune('a'+i%26)), 16<<10)}
	}
	echo := func(i int) {
		t.Helper()
		res, err := c.CallTool(ctx, "echo", args(i), nil)
		require.NoError(t, err)
		want, _ := json.Marshal(args(i))
		got, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got), "call %d", i)
	}
	for i := range 3 {
		echo(i)
	}
	_, task, err := c.StartTool(ctx, "slow", args(100), nil)
	require.NoError(t, err)
	require.NotNil(t, task)
	work := recv(t, g.started)
	for i := 3; i < 20; i++ {
		echo(i)
	}
	want, _ := json.Marshal(args(100))
	assert.JSONEq(t, string(want), string(work.Params.Arguments), "the task's arguments, once the call was answered")
	close(g.release)
	res, err := c.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
}
