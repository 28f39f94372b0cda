package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

type schemaBasic struct {
	Name   string  `json:"name" description:"who to greet"`
	Count  int     `json:"count,omitempty"`
	Ratio  float64 `json:"ratio"`
	OK     bool    `json:"ok"`
	Mode   string  `json:"mode" enum:"fast,slow"`
	Limit  int     `json:"limit" default:"10"`
	Tags   string  `json:"tags,omitempty" default:"[\"a\"]" description:"comma list"`
	NoTag  string
	Skip   string `json:"-"`
	hidden string // unexported: not in the schema
}

type schemaPerson struct {
	First string `json:"first"`
	Age   uint8  `json:"age,omitempty"`
}

type schemaNested struct {
	Owner  schemaPerson       `json:"owner" description:"who owns it"`
	Friend *schemaPerson      `json:"friend,omitempty"`
	Team   []schemaPerson     `json:"team"`
	Scores map[string]float64 `json:"scores"`
	Matrix [][]int32          `json:"matrix"`
	Fixed  [2]string          `json:"fixed"`
	Any    any                `json:"any"`
	Count  **int              `json:"count"`
}

type schemaPair struct {
	Left  schemaPerson `json:"left"`
	Right schemaPerson `json:"right"`
}

type schemaTree struct {
	Name     string                 `json:"name"`
	Children []schemaTree           `json:"children,omitempty"`
	Parent   *schemaTree            `json:"parent,omitempty"`
	Index    map[string]*schemaTree `json:"index,omitempty"`
}

type schemaA struct {
	B *schemaB `json:"b"`
}

type schemaB struct {
	A *schemaA `json:"a"`
	N int      `json:"n"`
}

func TestSchemaFor(t *testing.T) {
	t.Parallel()
	person := `{"type":"object","properties":{"first":{"type":"string"},"age":{"type":"integer"}},"required":["first"]}`
	tests := []struct {
		name   string
		schema json.RawMessage
		want   string
	}{
		{"string", mcp.SchemaFor[string](), `{"type":"string"}`},
		{"bool", mcp.SchemaFor[bool](), `{"type":"boolean"}`},
		{"int64", mcp.SchemaFor[int64](), `{"type":"integer"}`},
		{"uint", mcp.SchemaFor[uint](), `{"type":"integer"}`},
		{"float32", mcp.SchemaFor[float32](), `{"type":"number"}`},
		{"pointer", mcp.SchemaFor[*string](), `{"type":"string"}`},
		{"slice", mcp.SchemaFor[[]int](), `{"type":"array","items":{"type":"integer"}}`},
		{"map", mcp.SchemaFor[map[string]bool](), `{"type":"object","additionalProperties":{"type":"boolean"}}`},
		{"interface", mcp.SchemaFor[any](), `{}`},
		{"empty struct", mcp.SchemaFor[struct{}](), `{"type":"object","properties":{}}`},
		{
			"tags",
			mcp.SchemaFor[schemaBasic](),
			`{"type":"object","properties":{
				"name":{"type":"string","description":"who to greet"},
				"count":{"type":"integer"},
				"ratio":{"type":"number"},
				"ok":{"type":"boolean"},
				"mode":{"type":"string","enum":["fast","slow"]},
				"limit":{"type":"integer","default":10},
				"tags":{"type":"string","description":"comma list","default":["a"]},
				"NoTag":{"type":"string"}
			},"required":["name","ratio","ok","mode","NoTag"]}`,
		},
		{
			"nested",
			mcp.SchemaFor[schemaNested](),
			`{"type":"object","properties":{
				"owner":{"type":"object","properties":{"first":{"type":"string"},"age":{"type":"integer"}},"required":["first"],"description":"who owns it"},
				"friend":` + person + `,
				"team":{"type":"array","items":` + person + `},
				"scores":{"type":"object","additionalProperties":{"type":"number"}},
				"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"}}},
				"fixed":{"type":"array","items":{"type":"string"}},
				"any":{},
				"count":{"type":"integer"}
			},"required":["owner","team","scores","matrix","fixed","any","count"]}`,
		},
		{"pointer to struct", mcp.SchemaFor[*schemaPerson](), person},
		{
			"the same type twice is expanded twice",
			mcp.SchemaFor[schemaPair](),
			`{"type":"object","properties":{"left":` + person + `,"right":` + person + `},"required":["left","right"]}`,
		},
		{
			"recursive struct",
			mcp.SchemaFor[schemaTree](),
			`{"type":"object","properties":{
				"name":{"type":"string"},
				"children":{"type":"array","items":{"type":"object"}},
				"parent":{"type":"object"},
				"index":{"type":"object","additionalProperties":{"type":"object"}}
			},"required":["name"]}`,
		},
		{
			"mutually recursive structs",
			mcp.SchemaFor[schemaA](),
			`{"type":"object","properties":{
				"b":{"type":"object","properties":{"a":{"type":"object"},"n":{"type":"integer"}},"required":["a","n"]}
			},"required":["b"]}`,
		},
		{"slice of recursive struct", mcp.SchemaFor[[]schemaTree](), `{"type":"array","items":` + string(mcp.SchemaFor[schemaTree]()) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, json.Valid(tt.schema), "invalid JSON: %s", tt.schema)
			assert.JSONEq(t, tt.want, string(tt.schema))
		})
	}
}

// Page is embedded in schemaSearch, as shared arguments often are.
type Page struct {
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit"`
}

type schemaSearch struct {
	Page
	Query string `json:"query"`
}

type schemaBytes struct {
	Data []byte          `json:"data"`
	Raw  json.RawMessage `json:"raw,omitempty"`
	At   time.Time       `json:"at,omitempty"`
}

// TestSchemaFor_agreesWithEncodingJSON checks that the schema describes what
// encoding/json, which decodes the arguments of a typed tool, accepts.
// A client that follows a wrong schema gets -32602 from AddTypedTool.
func TestSchemaFor_agreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema json.RawMessage
		want   string
		into   any    // a pointer to the type
		valid  string // arguments that encoding/json decodes into it
	}{
		{
			// Bug: an embedded struct's fields are promoted by encoding/json,
			// but SchemaFor makes the embedded struct one required property
			// named after its type ("Page").
			name:   "embedded struct fields are promoted",
			schema: mcp.SchemaFor[schemaSearch](),
			want: `{"type":"object","properties":{
				"cursor":{"type":"string"},"limit":{"type":"integer"},"query":{"type":"string"}
			},"required":["limit","query"]}`,
			into:  new(schemaSearch),
			valid: `{"cursor":"c","limit":1,"query":"q"}`,
		},
		{
			// Bug: []byte is a base64 string in JSON, json.RawMessage is any
			// JSON value and time.Time an RFC 3339 string, but SchemaFor says
			// array of integers, array of integers and an empty object.
			name:   "types with their own JSON encoding",
			schema: mcp.SchemaFor[schemaBytes](),
			want: `{"type":"object","properties":{
				"data":{"type":"string","contentEncoding":"base64"},"raw":{},"at":{"type":"string","format":"date-time"}
			},"required":["data"]}`,
			into:  new(schemaBytes),
			valid: `{"data":"aGk=","raw":{"x":1},"at":"2025-01-02T03:04:05Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, json.Unmarshal([]byte(tt.valid), tt.into), "the arguments the schema should describe")
			assert.JSONEq(t, tt.want, string(tt.schema))
		})
	}
}

type (
	schemaList []schemaList
	schemaMap  map[string]schemaMap
	schemaPtr  *schemaPtr
)

// TestSchemaFor_recursiveNonStructTypes checks that SchemaFor ends on
// recursive types that are not structs. Such a type sends it into unbounded
// recursion (a fatal stack overflow) or an endless loop, which no recover
// can catch, so each case runs in a child process.
func TestSchemaFor_recursiveNonStructTypes(t *testing.T) {
	cases := map[string]func() json.RawMessage{
		"slice":   mcp.SchemaFor[schemaList],
		"map":     mcp.SchemaFor[schemaMap],
		"pointer": mcp.SchemaFor[schemaPtr],
	}
	if name := os.Getenv("MCP_SCHEMA_CHILD"); name != "" {
		debug.SetMaxStack(16 << 20) // fail in milliseconds, not after a gigabyte
		os.Stdout.Write(cases[name]())
		return
	}
	t.Parallel()
	for name := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSchemaFor_recursiveNonStructTypes$", "-test.count=1")
			cmd.Env = append(os.Environ(), "MCP_SCHEMA_CHILD="+name)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("SchemaFor on the recursive %s type did not return within 3s (endless loop)", name)
			}
			if len(out) > 600 {
				out = out[:600]
			}
			require.NoError(t, err, "SchemaFor on the recursive %s type crashed:\n%s", name, out)
		})
	}
}
