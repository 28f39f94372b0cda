package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
)

// Limits bound what [Limits.Decode] accepts from one frame. A zero field takes
// its default; a negative one disables that check.
type Limits struct {
	MaxBytes int // bytes in one frame; default 4 MiB
	MaxBatch int // messages in one batch; default 100
	MaxDepth int // nesting of arrays and objects, the envelope included; default 64, at most 4095
}

// Default limits.
const (
	DefaultMaxBytes = 4 << 20
	DefaultMaxBatch = 100
	DefaultMaxDepth = 64

	maxDepthCap = 4095 // validate's stack: deeper input is refused even without a limit
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxBatch == 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Frame is what one decoded frame holds.
type Frame struct {
	// Messages are the valid messages, in the order they were sent.
	Messages []Message
	// Replies are the error responses owed for invalid input: -32700 for
	// invalid JSON, -32600 for each invalid message.
	Replies []*Response
	// Batch reports whether the frame was a non-empty JSON array, whose
	// responses must go back as one array.
	Batch bool
}

// Decode decodes one frame with the default limits.
func Decode(data []byte) Frame { return Limits{}.Decode(data) }

// Decode decodes one frame: a single message or a batch. It never fails;
// whatever is invalid comes back as the error responses in Frame.Replies.
// Messages keep references into data, which must not be modified afterwards.
func (l Limits) Decode(data []byte) Frame {
	d := Decoder{Limits: l}
	return d.Decode(data)
}

// Decoder decodes the frames of one connection. Between frames it reuses the
// slice that Frame.Messages is built in, and it interns method names, so a
// steady stream of calls allocates less. A Decoder is for one goroutine at a
// time, and a Frame it returns is valid until its next Decode (the messages
// themselves stay valid).
type Decoder struct {
	Limits Limits

	msgs []Message
}

// methods interns method names for every Decoder. A table per connection
// would cost each idle connection its own copy of the same few names.
var methods = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// maxInterned bounds the method names kept: peers sending endless distinct
// names get no more than this much memory, and their names are simply
// allocated.
const maxInterned = 256

// Release drops what the decoder holds of the last frame it decoded (the
// messages of the Frame it returned, and with their params that frame's
// bytes), keeping its room for the next frame. A connection about to go
// quiet calls it, so as not to keep its last frame alive while idle; the
// Frame's Messages must no longer be in use.
func (d *Decoder) Release() { clear(d.msgs) }

// Decode decodes one frame, as Limits.Decode does.
func (d *Decoder) Decode(data []byte) Frame {
	clear(d.msgs)
	d.msgs = d.msgs[:0]
	l := d.Limits.withDefaults()
	if l.MaxBytes > 0 && len(data) > l.MaxBytes {
		return reject(Errorf(ErrInvalidRequest, "message of %d bytes exceeds the limit of %d", len(data), l.MaxBytes))
	}
	var top topMembers
	valid, deep := validate(data, l.MaxDepth, &top)
	if deep {
		limit := l.MaxDepth
		if limit <= 0 || limit > maxDepthCap {
			limit = maxDepthCap
		}
		return reject(Errorf(ErrInvalidRequest, "nesting exceeds the limit of %d levels", limit))
	}
	if !valid {
		return reject(parseError(data))
	}
	data = trimSpace(data)
	if data[0] != '[' {
		var m Message
		var reply *Response
		if data[0] == '{' && top.complete() {
			m, reply = d.decodeMessage(data, &top)
		} else {
			m, reply = d.decodeMessage(data, nil)
		}
		if reply != nil {
			return Frame{Replies: []*Response{reply}}
		}
		if r, ok := m.(*Request); ok && data[0] == '{' && !top.paramsMeta {
			r.noteParamsWithoutMeta() // validate read every key of its params
		}
		d.msgs = append(d.msgs, m)
		return Frame{Messages: d.msgs}
	}

	// Count first, so that an oversized batch is refused before anything is
	// allocated for it.
	n := 0
	for it := (arrayIter{data: data}); ; n++ {
		if _, ok := it.next(); !ok {
			break
		}
		if l.MaxBatch > 0 && n >= l.MaxBatch {
			return reject(Errorf(ErrInvalidRequest, "batch exceeds the limit of %d messages", l.MaxBatch))
		}
	}
	if n == 0 {
		return reject(Errorf(ErrInvalidRequest, "empty batch"))
	}
	f := Frame{Batch: true}
	for it := (arrayIter{data: data}); ; {
		elem, ok := it.next()
		if !ok {
			break
		}
		m, reply := d.decodeMessage(elem, nil)
		if reply != nil {
			f.Replies = append(f.Replies, reply)
		} else {
			d.msgs = append(d.msgs, m)
		}
	}
	f.Messages = d.msgs
	return f
}

// intern returns the method name in a valid JSON string, without allocating
// when the name was seen before.
func (d *Decoder) intern(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	methods.RLock()
	s, ok := methods.m[string(inner)]
	methods.RUnlock()
	if ok {
		return s, true
	}
	s, ok = unquote(v)
	if ok && string(inner) == s {
		methods.Lock()
		if len(methods.m) < maxInterned {
			methods.m[s] = s
		}
		methods.Unlock()
	}
	return s, ok
}

// DecodeMessage decodes a frame that must hold exactly one valid message (not
// a batch); otherwise it returns the *Error that a peer would be answered.
func DecodeMessage(data []byte) (Message, error) {
	f := Decode(data)
	switch {
	case len(f.Replies) > 0:
		return nil, f.Replies[0].Error
	case f.Batch:
		return nil, Errorf(ErrInvalidRequest, "unexpected batch")
	}
	return f.Messages[0], nil
}

func reject(e *Error) Frame {
	return Frame{Replies: []*Response{{ID: NullID(), Error: e}}}
}

func parseError(data []byte) *Error {
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Errorf(ErrParse, "%s", err.Error())
	}
	return ErrParse
}

func invalid(id ID, detail string) *Response {
	return &Response{ID: id, Error: Errorf(ErrInvalidRequest, "%s", detail)}
}

// member bits, to detect duplicates and tell the message's shape.
const (
	hasJSONRPC = 1 << iota
	hasID
	hasMethod
	hasParams
	hasResult
	hasError
)

// decodeMessage decodes one valid JSON value as a message, or returns the
// error response it is owed. top holds the value's members when validate
// noted them all; nil means they are read from v.
func (d *Decoder) decodeMessage(v []byte, top *topMembers) (Message, *Response) {
	if v[0] != '{' {
		return nil, invalid(NullID(), "a message must be a JSON object")
	}
	var (
		seen                                             int
		version, idRaw, method, params, result, errorRaw []byte
	)
	it := objectIter{data: v}
	for n := 0; ; n++ {
		var key, val []byte
		if top != nil {
			if n == top.n {
				break
			}
			key, val = top.m[n].key, top.m[n].val
		} else {
			var ok bool
			if key, val, ok = it.next(); !ok {
				break
			}
		}
		var bit int
		switch string(keyName(key)) {
		case "jsonrpc":
			bit, version = hasJSONRPC, val
		case "id":
			bit, idRaw = hasID, val
		case "method":
			bit, method = hasMethod, val
		case "params":
			bit, params = hasParams, val
		case "result":
			bit, result = hasResult, val
		case "error":
			bit, errorRaw = hasError, val
		default:
			continue
		}
		if seen&bit != 0 {
			return nil, invalid(NullID(), "duplicate member "+string(key))
		}
		seen |= bit
	}

	// The id to answer with: the message's own when it is a request whose id
	// can be read, otherwise null (see the package's implementation notes).
	var id ID
	idOK := true
	if seen&hasID != 0 {
		id, idOK = parseID(idRaw)
	}
	replyID := NullID()
	if seen&hasMethod != 0 && idOK && id.IsValid() {
		replyID = id
	}

	if seen&hasJSONRPC == 0 {
		return nil, invalid(replyID, `missing "jsonrpc":"2.0"`)
	}
	if string(version) != `"2.0"` && !isEscaped20(version) {
		return nil, invalid(replyID, `"jsonrpc" must be exactly "2.0"`)
	}
	if !idOK {
		return nil, invalid(NullID(), `"id" must be a string, a number or null`)
	}

	if seen&hasMethod != 0 {
		if seen&(hasResult|hasError) != 0 {
			return nil, invalid(replyID, `a request cannot carry "result" or "error"`)
		}
		name, ok := d.intern(method)
		if !ok {
			return nil, invalid(replyID, `"method" must be a string`)
		}
		if seen&hasParams != 0 && params[0] != '{' && params[0] != '[' {
			return nil, invalid(replyID, `"params" must be an object or an array`)
		}
		return &Request{ID: id, Method: name, Params: json.RawMessage(params)}, nil
	}

	switch seen & (hasResult | hasError) {
	case 0:
		return nil, invalid(NullID(), `a message needs "method", "result" or "error"`)
	case hasResult | hasError:
		return nil, invalid(NullID(), `a response cannot carry both "result" and "error"`)
	}
	if seen&hasID == 0 {
		return nil, invalid(NullID(), `a response needs an "id"`)
	}
	if seen&hasParams != 0 {
		return nil, invalid(NullID(), `a response cannot carry "params"`)
	}
	if seen&hasResult != 0 {
		return &Response{ID: id, Result: json.RawMessage(result)}, nil
	}
	e, ok := decodeError(errorRaw)
	if !ok {
		return nil, invalid(NullID(), `"error" must be an object with an integer "code" and a string "message"`)
	}
	return &Response{ID: id, Error: e}, nil
}

// isEscaped20 reports whether v is the string "2.0" written with escapes.
func isEscaped20(v []byte) bool {
	s, ok := unquote(v)
	return ok && s == "2.0"
}

func decodeError(v []byte) (*Error, bool) {
	if v[0] != '{' {
		return nil, false
	}
	var (
		e                 Error
		haveCode, haveMsg bool
	)
	for it := (objectIter{data: v}); ; {
		key, val, ok := it.next()
		if !ok {
			break
		}
		switch string(keyName(key)) {
		case "code":
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || haveCode {
				return nil, false
			}
			e.Code, haveCode = Code(n), true
		case "message":
			s, ok := unquote(val)
			if !ok || haveMsg {
				return nil, false
			}
			e.Message, haveMsg = s, true
		case "data":
			e.Data = json.RawMessage(val)
		}
	}
	return &e, haveCode && haveMsg
}

// The helpers below walk JSON that validate has already accepted, so they
// only find the extent of values and never report syntax errors; on other
// input (Member, SetMember) they stop at the end instead of panicking.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i]
// (len(b) when it does not end). A string ends at its first quote that no
// backslash escapes: one after an even run of backslashes (each escapes the
// next). So one search for quotes, vectorised, crosses it; escapes are
// looked at only where a quote is found.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		j += q
		k := j
		for k > i+1 && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value that starts at b[i]
// (len(b) when it runs off the end).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
			i++
		}
		return i
	}
}

// arrayIter yields the elements of a valid JSON array.
type arrayIter struct {
	data []byte
	i    int
}

func (it *arrayIter) next() ([]byte, bool) {
	if it.i == 0 {
		it.i = 1 // past '['
	}
	i := skipSpace(it.data, it.i)
	if i < len(it.data) && it.data[i] == ',' {
		i = skipSpace(it.data, i+1)
	}
	if i >= len(it.data) || it.data[i] == ']' {
		it.i = len(it.data)
		return nil, false
	}
	end := skipValue(it.data, i)
	it.i = end
	return it.data[i:end], true
}

// objectIter yields the members of a valid JSON object; key keeps its quotes.
type objectIter struct {
	data []byte
	i    int
}

func (it *objectIter) next() (key, val []byte, ok bool) {
	if it.i == 0 {
		it.i = 1 // past '{'
	}
	i := skipSpace(it.data, it.i)
	if i < len(it.data) && it.data[i] == ',' {
		i = skipSpace(it.data, i+1)
	}
	if i >= len(it.data) || it.data[i] != '"' {
		it.i = len(it.data)
		return nil, nil, false
	}
	kend := skipString(it.data, i)
	key = it.data[i:kend]
	i = skipSpace(it.data, kend)
	if i >= len(it.data) || it.data[i] != ':' {
		it.i = len(it.data)
		return nil, nil, false // not an object after all
	}
	i = skipSpace(it.data, i+1)
	if i >= len(it.data) {
		it.i = len(it.data)
		return nil, nil, false
	}
	end := skipValue(it.data, i)
	it.i = end
	return key, it.data[i:end], true
}

// keyName returns the member name of a quoted key, unescaping only when the
// key holds an escape. Callers switch on string(keyName(key)), which the
// compiler does without allocating.
func keyName(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 {
		return key[1 : len(key)-1]
	}
	s, _ := unquote(key)
	return []byte(s)
}

// unquote returns the string value of v, if it is a JSON string. Strings
// of plain ASCII are read in place; anything else goes through
// encoding/json, which also refuses what is not valid.
func unquote(v []byte) (string, bool) {
	if !quoted(v) {
		return "", false
	}
	if inner, ok := plainInner(v); ok {
		return string(inner), true
	}
	return unescape(v)
}

// quoted reports whether v starts and ends with a quote, as a JSON string
// does.
func quoted(v []byte) bool { return len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' }

// unescape returns the value of the JSON string v, escapes and all, by
// encoding/json, which also refuses what is not valid.
func unescape(v []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// plainInner returns the inside of v, a JSON string between its quotes
// (quoted), when that is the string's value as it is: plain ASCII, without
// an escape, a quote or a control character.
func plainInner(v []byte) ([]byte, bool) {
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
	}
	return inner, true
}
