package jaegertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Trace is one trace as Jaeger returns it.
type Trace struct {
	ID    string // 32 hex digits
	Spans []*Span
}

// Span is one span of a Trace, with its resource's attributes. Attribute
// values are given as text: a string as it is, a number in decimal, a bool
// as true or false, anything else as its OTLP JSON.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      string // SERVER, CLIENT, INTERNAL, PRODUCER, CONSUMER
	Attributes                map[string]string
	Resource                  map[string]string
	Links                     []Link
	StatusCode                string // UNSET, OK, ERROR
	StatusMessage             string
	Start, End                time.Time
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
}

// Names returns the names of the trace's spans, for messages.
func (tr *Trace) Names() []string {
	names := make([]string, len(tr.Spans))
	for i, s := range tr.Spans {
		names[i] = s.Name
	}
	return names
}

// Span returns the span named name, or nil.
func (tr *Trace) Span(name string) *Span {
	for _, s := range tr.Spans {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ByID returns the span with the id spanID, or nil.
func (tr *Trace) ByID(spanID string) *Span {
	for _, s := range tr.Spans {
		if s.SpanID == spanID {
			return s
		}
	}
	return nil
}

// The query API's answer: OTLP JSON (ids in hex, enums as numbers, 64-bit
// integers as strings) inside {"result": ...}.
type (
	otlpAnswer struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpKeyValue `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	otlpSpan struct {
		TraceID      string         `json:"traceId"`
		SpanID       string         `json:"spanId"`
		ParentSpanID string         `json:"parentSpanId"`
		Name         string         `json:"name"`
		Kind         json.Number    `json:"kind"`
		Attributes   []otlpKeyValue `json:"attributes"`
		Links        []struct {
			TraceID string `json:"traceId"`
			SpanID  string `json:"spanId"`
		} `json:"links"`
		Status struct {
			Code    json.Number `json:"code"`
			Message string      `json:"message"`
		} `json:"status"`
		Start json.Number `json:"startTimeUnixNano"`
		End   json.Number `json:"endTimeUnixNano"`
	}
	otlpKeyValue struct {
		Key   string `json:"key"`
		Value struct {
			String *string          `json:"stringValue"`
			Int    *json.Number     `json:"intValue"`
			Bool   *bool            `json:"boolValue"`
			Double *json.Number     `json:"doubleValue"`
			Other  json.RawMessage  `json:"arrayValue"`
			KV     *json.RawMessage `json:"kvlistValue"`
		} `json:"value"`
	}
)

var (
	spanKinds   = []string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}
	statusCodes = []string{"UNSET", "OK", "ERROR"}
)

// decodeTraces reads the query API's answer, grouping its spans by trace
// in the order they come.
func decodeTraces(body []byte) ([]*Trace, error) {
	var a otlpAnswer
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&a); err != nil {
		return nil, fmt.Errorf("jaegertest: decode the query API's answer: %w", err)
	}
	var traces []*Trace
	for _, rs := range a.Result.ResourceSpans {
		res := attributes(rs.Resource.Attributes)
		for _, ss := range rs.ScopeSpans {
			for _, os := range ss.Spans {
				s := &Span{
					TraceID:       os.TraceID,
					SpanID:        os.SpanID,
					ParentID:      os.ParentSpanID,
					Name:          os.Name,
					Kind:          enum(spanKinds, os.Kind),
					Attributes:    attributes(os.Attributes),
					Resource:      res,
					StatusCode:    enum(statusCodes, os.Status.Code),
					StatusMessage: os.Status.Message,
					Start:         unixNano(os.Start),
					End:           unixNano(os.End),
				}
				for _, l := range os.Links {
					s.Links = append(s.Links, Link{TraceID: l.TraceID, SpanID: l.SpanID})
				}
				i := slices.IndexFunc(traces, func(t *Trace) bool { return t.ID == s.TraceID })
				if i < 0 {
					traces = append(traces, &Trace{ID: s.TraceID})
					i = len(traces) - 1
				}
				traces[i].Spans = append(traces[i].Spans, s)
			}
		}
	}
	return traces, nil
}

// unixNano reads a time in Unix nanoseconds (OTLP JSON writes 64-bit
// integers as strings); the zero time when there is none.
func unixNano(n json.Number) time.Time {
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

// enum names the OTLP enum value n (a number, or already a name).
func enum(names []string, n json.Number) string {
	if n == "" {
		return names[0]
	}
	if i, err := strconv.Atoi(string(n)); err == nil && i >= 0 && i < len(names) {
		return names[i]
	}
	return string(n)
}

func attributes(kvs []otlpKeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.String != nil:
			m[kv.Key] = *v.String
		case v.Int != nil:
			m[kv.Key] = v.Int.String()
		case v.Bool != nil:
			m[kv.Key] = strconv.FormatBool(*v.Bool)
		case v.Double != nil:
			m[kv.Key] = v.Double.String()
		case v.Other != nil:
			m[kv.Key] = string(v.Other)
		case v.KV != nil:
			m[kv.Key] = string(*v.KV)
		}
	}
	return m
}
