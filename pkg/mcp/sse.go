package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Server-Sent Events (the WHATWG HTML standard's text/event-stream), as far
// as Streamable HTTP needs them: the server writes events with an id, a
// data payload and an optional retry hint; the client reads them back.

// appendSSEEvent appends one event to b. An empty id writes no id line; a
// positive retry writes a retry line. The data is written one "data:" line
// per line of it, so a payload with line breaks (a JSON text may have them
// between its tokens) survives: the reader joins the lines with "\n", which
// JSON reads as the same whitespace. Empty data writes one empty "data:"
// line, which makes the event a priming event: an id and nothing else.
func appendSSEEvent(b []byte, id string, data []byte, retry time.Duration) []byte {
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if retry > 0 {
		b = append(b, "retry: "...)
		b = strconv.AppendInt(b, retry.Milliseconds(), 10)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	// ID is the stream's last event id after this event: the id field of
	// this event, or of an earlier one when it had none.
	ID string
	// HasID reports whether this event carried an id field itself.
	HasID bool
	// Name is the event type; "" means "message".
	Name string
	// Data is the payload, its lines joined with "\n".
	Data []byte
	// Retry is the reconnection delay the event set, or 0.
	Retry time.Duration
}

// errSSELineTooLong is returned for a line longer than the reader's limit.
var errSSELineTooLong = errors.New("mcp: SSE line exceeds the size limit")

// sseReader reads events from a text/event-stream body. It follows the
// WHATWG parsing rules: lines end with CRLF, LF or CR; a line starting with
// ":" is a comment; "field: value" loses one leading space of the value;
// unknown fields are ignored; an empty line dispatches the event. An id
// containing NUL is ignored, as is a retry that is not all digits.
type sseReader struct {
	r      *bufio.Reader
	max    int // bytes of one event's data, and of one line
	lastID string
	line   []byte
	pendCR bool // the previous line ended with a lone CR: skip a LF that follows
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 4096), max: max}
}

// readLine returns the next line without its terminator.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(s.line) > 0 {
				// A stream that ends mid-line: the line is incomplete and,
				// per the standard, so is its event. Report the end.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if s.pendCR {
			s.pendCR = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return s.line, nil
		case '\r':
			s.pendCR = true
			return s.line, nil
		}
		if len(s.line) >= s.max {
			return nil, errSSELineTooLong
		}
		s.line = append(s.line, c)
	}
}

// Next returns the next dispatched event. Events whose data is empty are
// returned too (with Data empty): in MCP such an event primes the client
// with an event id to resume from. It returns io.EOF at the end of the
// stream; an event cut off by the end is dropped, as the standard says.
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData && !ev.HasID && ev.Retry == 0 && ev.Name == "" {
				continue // nothing since the last dispatch
			}
			ev.ID = s.lastID
			if hasData {
				ev.Data = data[:len(data)-1] // the last "\n" goes
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if len(data)+len(value)+1 > s.max {
				return sseEvent{}, fmt.Errorf("%w: an event of more than %d bytes", errSSELineTooLong, s.max)
			}
			data = append(data, value...)
			data = append(data, '\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
				ev.HasID = true
			}
		case "event":
			ev.Name = string(value)
		case "retry":
			if ms, ok := parseRetry(value); ok {
				ev.Retry = ms
			}
		}
	}
}

// parseRetry reads a retry field: ASCII digits only, in milliseconds.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 || len(v) > 9 {
		return 0, false // more than 9 digits is over 11 days: not a delay worth honouring
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return time.Duration(n) * time.Millisecond, true
}
