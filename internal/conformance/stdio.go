package conformance

import (
	"context"
	"io"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// ServeStdio serves the fixture (made with opts) on r and w, one message a
// line, as a server that `hub connect` runs is served, until r ends or ctx
// does; then it stops the tasks still running.
func ServeStdio(ctx context.Context, opts *mcp.ServerOptions, r io.Reader, w io.Writer) error {
	s := NewServer(opts)
	ss := s.Serve(ctx, peer.NewStdio(r, w, nil))
	err := ss.Wait()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(stop) // the tasks still running fail, saying the server stopped
	return err
}
