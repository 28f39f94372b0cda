package tracing

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP encoding of a batch of spans: an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1) in protobuf, written straight
// from the spans into one buffer that the exporter reuses, without the
// intermediate protobuf structures of the SDK's exporters (an allocation
// for every attribute of every span, then a copy of it all). The field
// numbers are those of opentelemetry-proto's trace.proto, common.proto and
// resource.proto; TestOTLPEncoding reads what this writes with the
// official generated types.

// Field numbers.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1 // ResourceSpans.resource
	fResourceSpansScopeSpans = 2 // ResourceSpans.scope_spans
	fResourceSpansSchemaURL  = 3 // ResourceSpans.schema_url
	fResourceAttributes      = 1 // Resource.attributes

	fScopeSpansScope = 1 // ScopeSpans.scope
	fScopeSpansSpans = 2 // ScopeSpans.spans
	fScopeName       = 1 // InstrumentationScope.name

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7 // fixed64, Unix nanoseconds
	fSpanEnd          = 8 // fixed64
	fSpanAttributes   = 9
	fSpanLinks        = 13
	fSpanStatus       = 15
	fSpanFlags        = 16 // fixed32

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkFlags      = 6 // fixed32

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fArrayVals = 1 // ArrayValue.values
)

// The span flags' bits beyond the trace flags: whether the parent was
// remote is known, and whether it was.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// The status codes of OTLP (Status.StatusCode), which number them otherwise
// than codes.Code does.
const (
	statusOK    = 1
	statusError = 2
)

// encoder writes ExportTraceServiceRequests for one resource and scope,
// reusing its buffer: the exporter's one goroutine uses it.
type encoder struct {
	head  []byte // ResourceSpans.resource: the same in every request
	scope []byte // ScopeSpans.scope
	tail  []byte // ResourceSpans.schema_url
	buf   []byte
}

func newEncoder(res *resource.Resource, scope string) *encoder {
	e := &encoder{}
	var r []byte
	for _, kv := range res.Attributes() {
		r = appendAttribute(r, fResourceAttributes, kv)
	}
	e.head = protowire.AppendTag(nil, fResourceSpansResource, protowire.BytesType)
	e.head = protowire.AppendBytes(e.head, r)
	if url := res.SchemaURL(); url != "" {
		e.tail = appendStringField(nil, fResourceSpansSchemaURL, url)
	}
	e.scope = appendEmbedded(nil, fScopeSpansScope, func(b []byte) []byte { return appendStringField(b, fScopeName, scope) })
	return e
}

// encode returns the request carrying spans; it is valid until the next
// encode.
func (e *encoder) encode(spans []*span) []byte {
	b := e.buf[:0]
	b = appendEmbedded(b, fRequestResourceSpans, func(b []byte) []byte {
		b = append(b, e.head...)
		b = appendEmbedded(b, fResourceSpansScopeSpans, func(b []byte) []byte {
			b = append(b, e.scope...)
			for _, s := range spans {
				b = appendEmbedded(b, fScopeSpansSpans, s.appendOTLP)
			}
			return b
		})
		return append(b, e.tail...)
	})
	e.buf = b
	return b
}

// appendOTLP appends the span's fields, as a Span message.
func (s *span) appendOTLP(b []byte) []byte {
	tid, sid := s.sc.TraceID(), s.sc.SpanID()
	b = appendBytesField(b, fSpanTraceID, tid[:])
	b = appendBytesField(b, fSpanSpanID, sid[:])
	if ts := s.sc.TraceState(); ts.Len() > 0 {
		b = appendStringField(b, fSpanTraceState, ts.String())
	}
	if s.parent.IsValid() {
		b = appendBytesField(b, fSpanParentSpanID, s.parent[:])
	}
	b = protowire.AppendTag(b, fSpanName, protowire.BytesType)
	n := len(s.prefix) + len(s.method)
	if s.target != "" {
		n += 1 + len(s.target)
	}
	b = protowire.AppendVarint(b, uint64(n))
	b = append(append(b, s.prefix...), s.method...)
	if s.target != "" {
		b = append(append(b, ' '), s.target...)
	}
	b = protowire.AppendTag(b, fSpanKind, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(s.kind))
	b = protowire.AppendTag(b, fSpanStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(s.start.UnixNano()))
	b = protowire.AppendTag(b, fSpanEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(s.end.UnixNano()))
	s.eachAttribute(func(kv attribute.KeyValue) { b = appendAttribute(b, fSpanAttributes, kv) })
	for _, l := range s.links {
		b = appendEmbedded(b, fSpanLinks, func(b []byte) []byte {
			tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytesField(b, fLinkTraceID, tid[:])
			b = appendBytesField(b, fLinkSpanID, sid[:])
			if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
				b = appendStringField(b, fLinkTraceState, ts.String())
			}
			b = protowire.AppendTag(b, fLinkFlags, protowire.Fixed32Type)
			return protowire.AppendFixed32(b, remoteFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		})
	}
	if s.status != codes.Unset {
		b = appendEmbedded(b, fSpanStatus, func(b []byte) []byte {
			if s.message != "" {
				b = appendStringField(b, fStatusMessage, s.message)
			}
			code := uint64(statusOK)
			if s.status == codes.Error {
				code = statusError
			}
			b = protowire.AppendTag(b, fStatusCode, protowire.VarintType)
			return protowire.AppendVarint(b, code)
		})
	}
	b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, remoteFlags(s.sc.TraceFlags(), s.parentRemote))
}

// remoteFlags are the flags of a span or link: its trace flags, and
// whether its parent (or the linked span) is remote.
func remoteFlags(f trace.TraceFlags, remote bool) uint32 {
	v := uint32(flagHasIsRemote)
	if f.IsSampled() {
		v |= 1
	}
	if remote {
		v |= flagIsRemote
	}
	return v
}

// appendAttribute appends field num holding an attribute as a KeyValue.
// A string's, most of the hub's, is written with its lengths computed
// first (appendEmbedded would move each of its two messages).
func appendAttribute(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	if kv.Value.Type() != attribute.STRING {
		return appendEmbedded(b, num, func(b []byte) []byte { return appendKeyValue(b, kv) })
	}
	key, v := string(kv.Key), kv.Value.AsString()
	value := 1 + protowire.SizeBytes(len(v))                                   // AnyValue.string_value
	body := 1 + protowire.SizeBytes(len(key)) + 1 + protowire.SizeBytes(value) // KeyValue.key, .value
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(body))
	b = appendStringField(b, fKeyValueKey, key)
	b = protowire.AppendTag(b, fKeyValueValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(value))
	return appendStringField(b, fAnyString, v)
}

// appendKeyValue appends an attribute's fields, as a KeyValue message.
func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendStringField(b, fKeyValueKey, string(kv.Key))
	return appendEmbedded(b, fKeyValueValue, func(b []byte) []byte { return appendValue(b, kv.Value) })
}

// appendValue appends a value's fields, as an AnyValue message.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		return appendStringField(b, fAnyString, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRINGSLICE:
		return appendArray(b, len(v.AsStringSlice()), func(b []byte, i int) []byte { return appendStringField(b, fAnyString, v.AsStringSlice()[i]) })
	case attribute.BOOLSLICE:
		return appendArray(b, len(v.AsBoolSlice()), func(b []byte, i int) []byte {
			b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
			return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBoolSlice()[i]))
		})
	case attribute.INT64SLICE:
		return appendArray(b, len(v.AsInt64Slice()), func(b []byte, i int) []byte {
			b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
			return protowire.AppendVarint(b, uint64(v.AsInt64Slice()[i]))
		})
	case attribute.FLOAT64SLICE:
		return appendArray(b, len(v.AsFloat64Slice()), func(b []byte, i int) []byte {
			b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
			return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64Slice()[i]))
		})
	}
	return appendStringField(b, fAnyString, v.Emit()) // a type this encoder does not know: as text
}

// appendArray appends an ArrayValue of n values, each written by value.
func appendArray(b []byte, n int, value func(b []byte, i int) []byte) []byte {
	return appendEmbedded(b, fAnyArray, func(b []byte) []byte {
		for i := range n {
			b = appendEmbedded(b, fArrayVals, func(b []byte) []byte { return value(b, i) })
		}
		return b
	})
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// lenReserve is the room kept for a message's length before it is known:
// the longest varint a length below 2^28 takes.
const lenReserve = 4

// appendEmbedded appends field num holding the message body writes. Its
// length is only known once the body is written: room is kept for it, and
// the body moved back over what it did not need (a few bytes, for the
// short messages that are most of them).
func appendEmbedded(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, make([]byte, lenReserve)...)
	b = body(b)
	n := len(b) - at - lenReserve
	size := protowire.SizeVarint(uint64(n))
	if size > lenReserve {
		panic("tracing: an OTLP message of 256 MiB or more") // the queue's batches are far smaller
	}
	protowire.AppendVarint(b[at:at], uint64(n))
	if size < lenReserve {
		copy(b[at+size:], b[at+lenReserve:])
		b = b[:len(b)-(lenReserve-size)]
	}
	return b
}
