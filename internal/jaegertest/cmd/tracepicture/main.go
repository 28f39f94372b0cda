// Command tracepicture draws docs/tracing-cross-instance.png: one call
// from a client on instance A to a server on instance B (two hubs sharing a
// redis-server), which asks the client to sample in the middle of it, as
// the real Jaeger of the tests holds its trace, read back through Jaeger's
// query API and drawn as a waterfall in headless chromium (web/test's
// playwright-core and Debian's /usr/bin/chromium).
//
// The Jaeger the tests build (e2e/tracing) has no UI: its assets come from
// the jaeger-ui project's own build, not from the Go module. The waterfall
// is drawn here from what Jaeger returns, span by span.
//
//	go run ./internal/jaegertest/cmd/tracepicture [-out docs/tracing-cross-instance.png]
//
// Run it from the repository's root, after `make deps`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

func main() {
	out := flag.String("out", "docs/tracing-cross-instance.png", "the picture to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "tracepicture:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "tracepicture")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	j, err := jaegertest.Launch(dir)
	if err != nil {
		return err
	}
	defer j.Stop()
	rdir := filepath.Join(dir, "redis")
	if err := os.Mkdir(rdir, 0o755); err != nil {
		return err
	}
	rs, err := redistest.Launch(rdir)
	if err != nil {
		return err
	}
	defer rs.Stop()

	export := tracing.Config{Enabled: true, Endpoint: j.OTLPHTTP(), BatchDelay: 20 * time.Millisecond}
	a, stopA, err := startHub(ctx, rs.URL(), "instance-A", export)
	if err != nil {
		return err
	}
	defer stopA()
	b, stopB, err := startHub(ctx, rs.URL(), "instance-B", export)
	if err != nil {
		return err
	}
	defer stopB()

	// The weather server, instrumented: it continues the trace of its
	// request's _meta and asks the client to sample.
	export.Service, export.InstanceID = "weather-server", "weather-1"
	srvTracing, err := tracing.New(ctx, export)
	if err != nil {
		return err
	}
	defer srvTracing.Shutdown(context.Background())
	received := make(chan string, 1)
	srv := mcp.NewServer(mcp.Implementation{Name: "weather", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "forecast"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		params, _ := json.Marshal(map[string]any{"name": req.Params.Name, "_meta": req.Params.Meta})
		ctx, span := srvTracing.Start(ctx, tracing.Received, tracing.Op{Method: mcp.MethodToolsCall, Params: params})
		defer span.End()
		tp, _ := req.Params.Meta[mcp.MetaTraceparent].(string)
		received <- tp
		time.Sleep(3 * time.Millisecond) // the server's own work, to see on the picture
		res, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 20,
			Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("Summarise: rain, 14°C")}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
	})
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	go srv.Dial(srvCtx, "ws://"+b+"/mcp/server", nil)

	c, err := mcp.Connect(ctx, "ws://"+a+"/mcp", &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion,
		Info: mcp.Implementation{Name: "picture-client", Version: "1"},
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			time.Sleep(2 * time.Millisecond) // the client's model, thinking
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("Rainy, 14°C.")}, nil
		}})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := waitTool(ctx, c, "weather__forecast"); err != nil {
		return err
	}
	if _, err := c.CallTool(ctx, "weather__forecast", map[string]string{"city": "Paris"}, nil); err != nil {
		return err
	}
	traceID, _, _ := strings.Cut(strings.TrimPrefix(<-received, "00-"), "-")
	if err := srvTracing.ForceFlush(ctx); err != nil {
		return err
	}
	tr, err := waitTrace(ctx, j, traceID, 9)
	if err != nil {
		return err
	}
	page := filepath.Join(dir, "trace.html")
	if err := os.WriteFile(page, []byte(waterfall(tr)), 0o644); err != nil {
		return err
	}
	return screenshot(ctx, page, out)
}

// startHub starts a hub instance with the id id on a loopback port, sharing
// the Redis at redisURL, traced as tc says; it returns its address.
func startHub(ctx context.Context, redisURL, id string, tc tracing.Config) (string, func(), error) {
	br, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: redisURL, KeyPrefix: "picture:", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", nil, err
	}
	h, err := hub.New(hub.Config{Broker: br, InstanceID: id, Tracing: tc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		br.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		br.Close()
		return "", nil, err
	}
	srv := h.NewHTTPServer()
	go srv.Serve(ln)
	return ln.Addr().String(), func() {
		srv.Close()
		h.Close()
		br.Close()
	}, nil
}

func waitTool(ctx context.Context, c *mcp.Client, name string) error {
	for {
		tools, err := c.AllTools(ctx)
		if err == nil && slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == name }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitTrace(ctx context.Context, j *jaegertest.Jaeger, id string, spans int) (*jaegertest.Trace, error) {
	for {
		tr, err := j.Trace(ctx, id)
		if err == nil && len(tr.Spans) >= spans {
			return tr, nil
		}
		if err != nil && !errors.Is(err, jaegertest.ErrNotFound) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for trace %s: %w", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waterfall is the trace drawn as HTML: a row per span, children below
// their parent and indented, a bar over the trace's time.
func waterfall(tr *jaegertest.Trace) string {
	children := map[string][]*jaegertest.Span{}
	for _, s := range tr.Spans {
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	for _, ss := range children {
		slices.SortFunc(ss, func(x, y *jaegertest.Span) int { return x.Start.Compare(y.Start) })
	}
	start, end := tr.Spans[0].Start, tr.Spans[0].End
	for _, s := range tr.Spans {
		if s.Start.Before(start) {
			start = s.Start
		}
		if s.End.After(end) {
			end = s.End
		}
	}
	total := float64(end.Sub(start))
	colors := map[string]string{"instance-A": "#2f6fde", "instance-B": "#d9822b", "weather-1": "#2e9e5b"}
	var rows strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range children[parent] {
			who := s.Resource["service.instance.id"]
			left := 100 * float64(s.Start.Sub(start)) / total
			width := max(0.4, 100*float64(s.End.Sub(s.Start))/total)
			detail := s.Kind
			for _, k := range []string{"switchboard.server.name", "switchboard.instance.peer", "network.protocol.name"} {
				if v := s.Attributes[k]; v != "" {
					detail += " · " + k + "=" + v
				}
			}
			label := fmt.Sprintf("left:%.2f%%", left+width+0.5) // after the bar, or before it when the bar ends far right
			if left+width > 85 {
				label = fmt.Sprintf("right:%.2f%%", 100-left+0.5)
			}
			fmt.Fprintf(&rows, `<tr><td class="name" style="padding-left:%dpx"><b>%s</b><br><small>%s</small></td><td class="who"><span style="background:%s"></span>%s</td>`+
				`<td class="bar"><div style="left:%.2f%%;width:%.2f%%;background:%s"></div><small style="%s">%s</small></td></tr>`+"\n",
				8+18*depth, html.EscapeString(s.Name), html.EscapeString(detail), colors[who], html.EscapeString(who),
				left, width, colors[who], label, s.End.Sub(s.Start).Round(10*time.Microsecond))
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return `<!doctype html><meta charset="utf-8"><style>
body{font:13px system-ui,sans-serif;margin:20px;color:#222}
h1{font-size:16px;margin:0 0 4px}p{margin:0 0 12px;color:#555}
table{border-collapse:collapse;width:100%}td{border-bottom:1px solid #eee;padding:5px 6px;vertical-align:middle}
td.name{width:38%}td.name small{color:#666}td.who{width:11%;white-space:nowrap}
td.who span{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
td.bar{position:relative;height:30px}td.bar div{position:absolute;top:9px;height:12px;border-radius:2px}
td.bar small{position:absolute;top:8px;color:#444}
</style><h1>tools/call weather__forecast: one trace across two hub instances, the server and the client</h1>
<p>Trace ` + html.EscapeString(tr.ID) + ` in Jaeger (` + fmt.Sprint(len(tr.Spans)) + ` spans, ` + end.Sub(start).Round(10*time.Microsecond).String() +
		`), read through its query API: a client on instance A calls a tool of a server on instance B, which asks the client to sample.</p>
<table>` + rows.String() + `</table>`
}

// screenshot has headless chromium draw page into the PNG out, through
// web/test's playwright-core.
func screenshot(ctx context.Context, page, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	script := `const { chromium } = require('playwright-core');
(async () => {
  const b = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
  const p = await b.newPage({ viewport: { width: 1280, height: 600 } });
  await p.goto('file://' + process.argv[1]);
  await p.screenshot({ path: process.argv[2], fullPage: true });
  await b.close();
})().catch((e) => { console.error(e); process.exit(1); });`
	cmd := exec.CommandContext(ctx, "node", "-e", script, page, abs)
	cmd.Dir = "web/test"
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node and playwright-core in web/test (make deps): %w", err)
	}
	fmt.Println("wrote", out)
	return nil
}
