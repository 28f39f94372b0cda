// Package demo is the demo MCP server that `hub --demo` runs beside the hub:
// a little of everything the hub routes, so that a newcomer sees something
// live at once, and so that tests and benchmarks have a server to talk to.
package demo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// URIs of the demo's resources.
const (
	ClockURI   = "demo://clock"
	CounterURI = "demo://counter"
)

// Server is the demo server.
type Server struct {
	*mcp.Server
	counter atomic.Int64
	clock   time.Duration
}

// Options tune the demo.
type Options struct {
	// Name is the server's name; default "demo".
	Name string
	// ClockInterval is how often demo://clock changes; default 1 s.
	ClockInterval time.Duration
}

type echoArgs struct {
	Text string `json:"text" description:"Text to send back"`
}

type addArgs struct {
	A float64 `json:"a" description:"First addend"`
	B float64 `json:"b" description:"Second addend"`
}

type slowArgs struct {
	Steps   int `json:"steps" default:"10" description:"How many steps to take"`
	DelayMs int `json:"delayMs" default:"200" description:"Milliseconds per step"`
}

type askArgs struct {
	Question string `json:"question" description:"What to ask the client's model"`
}

type incrementArgs struct {
	By int64 `json:"by,omitempty" default:"1" description:"How much to add to the counter"`
}

// New returns the demo server.
func New(opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "demo"
	}
	if o.ClockInterval <= 0 {
		o.ClockInterval = time.Second
	}
	d := &Server{
		// The session revisions only: ask blocks on CreateMessage, which
		// needs a session to send on (a request of 2026-07-28 has none).
		// Behind the hub, which speaks to each server in the newest
		// revision it supports, it is what exercises the translation for
		// clients of 2026-07-28.
		Server: mcp.NewServer(mcp.Implementation{Name: o.Name, Title: "Switchboard demo", Version: "1.0.0"},
			&mcp.ServerOptions{Instructions: "A demo server: echo, add, slow (with progress), ask (uses sampling).",
				ProtocolVersions: mcp.SupportedVersions}),
		clock: o.ClockInterval,
	}

	mcp.AddTypedTool(d.Server, &mcp.Tool{Name: "echo", Description: "Send text back."},
		func(ctx context.Context, req *mcp.ToolRequest, a echoArgs) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(a.Text)}}, nil
		})
	mcp.AddTypedTool(d.Server, &mcp.Tool{Name: "add", Description: "Add two numbers.",
		OutputSchema: []byte(`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`)},
		func(ctx context.Context, req *mcp.ToolRequest, a addArgs) (*mcp.CallToolResult, error) {
			sum := a.A + a.B
			return &mcp.CallToolResult{
				Content:           []mcp.Content{mcp.TextContent(strconv.FormatFloat(sum, 'f', -1, 64))},
				StructuredContent: map[string]float64{"sum": sum},
			}, nil
		})
	mcp.AddTypedTool(d.Server, &mcp.Tool{Name: "slow", Description: "Take a while, reporting progress; cancellable."},
		func(ctx context.Context, req *mcp.ToolRequest, a slowArgs) (*mcp.CallToolResult, error) {
			steps, delay := a.Steps, time.Duration(a.DelayMs)*time.Millisecond
			if steps <= 0 {
				steps = 10
			}
			if delay <= 0 {
				delay = 200 * time.Millisecond
			}
			t := time.NewTicker(delay)
			defer t.Stop()
			for i := 1; i <= steps; i++ {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-t.C:
				}
				_ = req.Progress(ctx, float64(i), float64(steps), fmt.Sprintf("step %d of %d", i, steps))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprintf("done after %d steps", steps))}}, nil
		})
	mcp.AddTypedTool(d.Server, &mcp.Tool{Name: "ask", Description: "Ask the calling client's model a question (sampling)."},
		func(ctx context.Context, req *mcp.ToolRequest, a askArgs) (*mcp.CallToolResult, error) {
			res, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent(a.Question)}},
				MaxTokens: 200,
			})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(res.Content.Text)}}, nil
		})
	mcp.AddTypedTool(d.Server, &mcp.Tool{Name: "increment", Description: "Add to demo://counter."},
		func(ctx context.Context, req *mcp.ToolRequest, a incrementArgs) (*mcp.CallToolResult, error) {
			by := a.By
			if by == 0 {
				by = 1
			}
			n := d.counter.Add(by)
			d.ResourceUpdated(ctx, CounterURI)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(strconv.FormatInt(n, 10))}}, nil
		})

	d.AddResource(&mcp.Resource{URI: ClockURI, Name: "clock", Title: "Clock", MIMEType: "text/plain",
		Description: "The current time; changes every second."},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(req.URI, time.Now().UTC().Format(time.RFC3339Nano)), nil
		})
	d.AddResource(&mcp.Resource{URI: CounterURI, Name: "counter", Title: "Counter", MIMEType: "text/plain",
		Description: "A number the increment tool adds to."},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(req.URI, strconv.FormatInt(d.counter.Load(), 10)), nil
		})
	d.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "demo://greeting/{name}", Name: "greeting",
		Title: "Greeting", MIMEType: "text/plain", Description: "A greeting for anyone."},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			name := strings.TrimPrefix(req.URI, "demo://greeting/")
			return text(req.URI, "Hello, "+name+"!"), nil
		})
	d.AddPrompt(&mcp.Prompt{Name: "greet", Title: "Greet", Description: "Ask for a greeting in a given style.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Description: "Who to greet", Required: true},
			{Name: "style", Description: "formal or casual"},
		}},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			style := req.Params.Arguments["style"]
			if style == "" {
				style = "casual"
			}
			return &mcp.GetPromptResult{
				Description: "A " + style + " greeting",
				Messages: []*mcp.PromptMessage{{Role: "user",
					Content: mcp.TextContent(fmt.Sprintf("Write a %s greeting for %s.", style, req.Params.Arguments["name"]))}},
			}, nil
		})
	d.SetCompletionHandler(func(ctx context.Context, s *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		var values []string
		if p.Argument.Name == "style" {
			for _, v := range []string{"casual", "formal"} {
				if strings.HasPrefix(v, p.Argument.Value) {
					values = append(values, v)
				}
			}
		}
		if values == nil {
			values = []string{}
		}
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: values, Total: len(values)}}, nil
	})
	return d
}

func text(uri, s string) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: s}}}
}

// Run dials the hub at url and serves it until ctx ends, ticking the clock.
func (d *Server) Run(ctx context.Context, url string, opts *mcp.DialOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d.clock)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				d.ResourceUpdated(ctx, ClockURI)
			}
		}
	}()
	err := d.Dial(ctx, url, opts)
	cancel()
	<-done
	return err
}
