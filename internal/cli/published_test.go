package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The published MCP servers, at the versions e2e/package.json pins, run
// by `hub connect` as users run it (a process of its own; node started
// directly, as npx would after its download), behind a hub in this process,
// called by a Go client of the hub.

// published starts `hub connect --name name -- node <pkg's entry> args...`.
func published(t *testing.T, th *testHub, name, pkg string, env []string, args ...string) *proc {
	t.Helper()
	node, entry := publishedServer(t, pkg)
	argv := append([]string{"connect", "--hub", th.base(), "--name", name, "--", node, entry}, args...)
	return startHubCommand(t, env, argv...).start(t)
}

// callText calls tool and returns its first text content.
func callText(t *testing.T, c *mcp.Client, tool string, args any, opts *mcp.CallOptions) string {
	t.Helper()
	res, err := c.CallTool(ctxFor(t), tool, args, opts)
	require.NoError(t, err, tool)
	require.False(t, res.IsError, "%s: %+v", tool, res.Content)
	require.NotEmpty(t, res.Content, tool)
	return res.Content[0].Text
}

// restartAndStop kills the server's process from outside, waits for the
// connector to restart it and the hub to list tool again, calls check on the
// new process, then stops the connector with SIGTERM: exit 0, no orphan.
func restartAndStop(t *testing.T, p *proc, c *mcp.Client, tool string, check func()) {
	t.Helper()
	pids := childPids(p.stderr.String())
	require.Len(t, pids, 1, p.stderr.String())
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	p.stderr.waitFor(t, 1, "was killed by signal 9 (killed); restarting")
	p.stderr.waitFor(t, 2, "server started")
	waitTool(t, c, tool, true)
	check()

	pids = childPids(p.stderr.String())
	require.Len(t, pids, 2)
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM), "SIGTERM ends the connector cleanly; its log:\n%s", p.stderr)
	assert.True(t, processGone(pids[1]), "no orphan server process")
	waitTool(t, c, tool, false)
}

func TestPublished_serverEverything(t *testing.T) {
	th := startHub(t)
	p := published(t, th, "everything", "server-everything", nil, "stdio")
	var mu sync.Mutex
	var sampled []string
	c := th.client(t, &mcp.ClientOptions{Sampling: func(ctx context.Context, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		mu.Lock()
		sampled = append(sampled, req.Messages[0].Content.Text)
		mu.Unlock()
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: mcp.TextContent("forty-two")}, nil
	}, Elicitation: func(ctx context.Context, req *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "check": true}}, nil
	}})
	// The tools that need a client capability are registered once the hub
	// initialized the server, and reach the list through list_changed.
	waitTool(t, c, "everything__trigger-sampling-request", true)
	waitTool(t, c, "everything__trigger-elicitation-request", true)
	ctx := ctxFor(t)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tools), 15)
	assert.Equal(t, "Echo: hello", callText(t, c, "everything__echo", map[string]string{"message": "hello"}, nil))

	resources := ownResources(t, c)
	var doc string
	for _, r := range resources {
		if strings.HasPrefix(r.URI, "demo://resource/static/document/") {
			doc = r.URI
		}
	}
	require.NotEmpty(t, doc, "a static document among %d resources", len(resources))
	read, err := c.ReadResource(ctx, doc)
	require.NoError(t, err)
	require.NotEmpty(t, read.Contents)
	assert.NotEmpty(t, read.Contents[0].Text)
	templates, err := c.AllResourceTemplates(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, templates)
	read, err = c.ReadResource(ctx, "demo://resource/dynamic/text/7")
	require.NoError(t, err, "a resource of a template")
	require.NotEmpty(t, read.Contents)

	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, prompts)
	prompt, err := c.GetPrompt(ctx, "everything__simple-prompt", nil)
	require.NoError(t, err)
	require.NotEmpty(t, prompt.Messages)
	assert.Equal(t, "This is a simple prompt without arguments.", prompt.Messages[0].Content.Text)

	var progress []float64
	text := callText(t, c, "everything__trigger-long-running-operation", map[string]float64{"duration": 0.3, "steps": 3},
		&mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
	assert.Contains(t, text, "Long running operation completed")
	assert.Equal(t, []float64{1, 2, 3}, progress, "every progress report reached the caller")

	text = callText(t, c, "everything__trigger-sampling-request", map[string]any{"prompt": "the answer?", "maxTokens": 10}, nil)
	assert.Contains(t, text, "forty-two", "the server's sampling request was answered by the calling client")
	mu.Lock()
	assert.Equal(t, []string{"Resource trigger-sampling-request context: the answer?"}, sampled)
	mu.Unlock()

	res, err := c.CallTool(ctx, "everything__trigger-elicitation-request", map[string]any{}, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(res.Content), 2, "%+v", res.Content)
	assert.Contains(t, res.Content[0].Text, "User provided the requested information")
	assert.Contains(t, res.Content[1].Text, "- Name: Ada Lovelace", "the server's elicitation was answered by the calling client")

	restartAndStop(t, p, c, "everything__echo", func() {
		assert.Equal(t, "Echo: again", callText(t, c, "everything__echo", map[string]string{"message": "again"}, nil))
	})
}

func TestPublished_serverMemory(t *testing.T) {
	th := startHub(t)
	file := filepath.Join(t.TempDir(), "memory.jsonl")
	p := published(t, th, "memory", "server-memory", []string{"MEMORY_FILE_PATH=" + file})
	c := th.client(t, nil)
	waitTool(t, c, "memory__create_entities", true)
	ctx := ctxFor(t)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tools), 9)
	callText(t, c, "memory__create_entities", map[string]any{"entities": []map[string]any{
		{"name": "switchboard", "entityType": "project", "observations": []string{"routes MCP"}},
	}}, nil)
	graph := callText(t, c, "memory__read_graph", map[string]any{}, nil)
	assert.Contains(t, graph, "routes MCP")

	resources := ownResources(t, c)
	require.Len(t, resources, 1)
	read, err := c.ReadResource(ctx, resources[0].URI)
	require.NoError(t, err)
	require.NotEmpty(t, read.Contents)
	assert.Contains(t, read.Contents[0].Text, "switchboard")
	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	assert.Empty(t, prompts, "server-memory offers no prompt")

	restartAndStop(t, p, c, "memory__read_graph", func() {
		assert.Contains(t, callText(t, c, "memory__read_graph", map[string]any{}, nil), "routes MCP",
			"the new process read what the old one wrote")
	})
}

func TestPublished_serverFilesystem(t *testing.T) {
	th := startHub(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the disk\n"), 0o600))
	p := published(t, th, "files", "server-filesystem", nil, dir)
	c := th.client(t, nil)
	waitTool(t, c, "files__read_text_file", true)
	ctx := ctxFor(t)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tools), 10)
	assert.Contains(t, callText(t, c, "files__list_directory", map[string]string{"path": dir}, nil), "hello.txt")
	assert.Equal(t, "hello from the disk\n", callText(t, c, "files__read_text_file", map[string]string{"path": filepath.Join(dir, "hello.txt")}, nil))
	callText(t, c, "files__write_file", map[string]string{"path": filepath.Join(dir, "new.txt"), "content": "written through the hub"}, nil)
	b, err := os.ReadFile(filepath.Join(dir, "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written through the hub", string(b))
	outside := callTextErr(t, c, "files__read_text_file", map[string]string{"path": "/etc/hostname"})
	assert.Contains(t, outside, "denied", "the server still guards its folder")

	assert.Empty(t, ownResources(t, c), "server-filesystem offers no resource")
	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	assert.Empty(t, prompts, "server-filesystem offers no prompt")

	restartAndStop(t, p, c, "files__read_text_file", func() {
		assert.Equal(t, "written through the hub", callText(t, c, "files__read_text_file", map[string]string{"path": filepath.Join(dir, "new.txt")}, nil))
	})
}

// callTextErr calls a tool that fails and returns its error text.
func callTextErr(t *testing.T, c *mcp.Client, tool string, args any) string {
	t.Helper()
	res, err := c.CallTool(ctxFor(t), tool, args, nil)
	if err != nil {
		return err.Error()
	}
	require.True(t, res.IsError, "%s should fail", tool)
	b, _ := json.Marshal(res.Content)
	return string(b)
}

// ownResources lists the resources of the servers, without the hub's own
// (switchboard://servers, switchboard://instances).
func ownResources(t *testing.T, c *mcp.Client) []*mcp.Resource {
	t.Helper()
	all, err := c.AllResources(ctxFor(t))
	require.NoError(t, err)
	var out []*mcp.Resource
	for _, r := range all {
		if !strings.HasPrefix(r.URI, "switchboard://") {
			out = append(out, r)
		}
	}
	return out
}

// startEverythingHTTP runs server-everything in one of its HTTP modes
// (streamableHttp or sse) on a free loopback port and returns its base URL
// once it listens.
func startEverythingHTTP(t *testing.T, mode string) string {
	t.Helper()
	node, entry := publishedServer(t, "server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // a port found free; the server takes it next
	cmd := exec.Command(node, entry, mode)
	cmd.Env = append(cleanEnv(), "PORT="+port)
	out := newSyncBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	out.waitFor(t, 1, port)
	return "http://127.0.0.1:" + port
}

// TestPublished_serverEverythingOverHTTP: server-everything in its
// Streamable HTTP mode, and in its older HTTP+SSE mode, through `hub connect
// --upstream`: lists, a call, progress, sampling answered by the client.
func TestPublished_serverEverythingOverHTTP(t *testing.T) {
	for _, tc := range []struct{ mode, path, transport string }{
		{"streamableHttp", "/mcp", "streamable-http"},
		{"sse", "/sse", "sse"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			base := startEverythingHTTP(t, tc.mode)
			th := startHub(t)
			p := startHubCommand(t, nil, "connect", "--hub", th.base(), "--name", "everything", "--upstream", base+tc.path).start(t)
			c := th.client(t, &mcp.ClientOptions{Sampling: func(ctx context.Context, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: mcp.TextContent("over " + tc.mode)}, nil
			}})
			waitTool(t, c, "everything__trigger-sampling-request", true)
			p.stderr.waitFor(t, 1, "transport="+tc.transport)
			assert.Equal(t, "Echo: hello", callText(t, c, "everything__echo", map[string]string{"message": "hello"}, nil))
			var progress []float64
			text := callText(t, c, "everything__trigger-long-running-operation", map[string]float64{"duration": 0.3, "steps": 3},
				&mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
			assert.Contains(t, text, "Long running operation completed")
			assert.Equal(t, []float64{1, 2, 3}, progress)
			text = callText(t, c, "everything__trigger-sampling-request", map[string]any{"prompt": "x", "maxTokens": 5}, nil)
			assert.Contains(t, text, "over "+tc.mode)
			prompt, err := c.GetPrompt(ctxFor(t), "everything__simple-prompt", nil)
			require.NoError(t, err)
			assert.NotEmpty(t, prompt.Messages)
			assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
			waitTool(t, c, "everything__echo", false)
		})
	}
}

// TestPublished_serverFilesystemRoots: server-filesystem asks for roots
// as soon as it is initialized, outside any call; with --root, the hub
// answers with it, and the server serves that folder instead of its
// argument's.
func TestPublished_serverFilesystemRoots(t *testing.T) {
	th := startHub(t)
	arg, root := t.TempDir(), t.TempDir()
	node, entry := publishedServer(t, "server-filesystem")
	p := startHubCommand(t, nil, "connect", "--hub", th.base(), "--name", "files", "--root", "file://"+root, "--", node, entry, arg).start(t)
	c := th.client(t, nil)
	waitTool(t, c, "files__list_allowed_directories", true)
	p.stderr.waitFor(t, 1, "Updated allowed directories from MCP roots: 1 valid directories")
	allowed := callText(t, c, "files__list_allowed_directories", map[string]any{}, nil)
	assert.Contains(t, allowed, root)
	assert.NotContains(t, allowed, arg)
	assert.NotContains(t, p.stderr.String(), "Failed to request initial roots")
}
