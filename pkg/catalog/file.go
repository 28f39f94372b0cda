package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Catalog is a parsed and checked catalog file: the virtual servers, and
// how the aggregate endpoint names what several servers offer. It is
// immutable once Parse returns it.
type Catalog struct {
	VirtualServers []*VirtualServer `json:"virtualServers"`
	// Aggregate is the naming policy of the aggregate endpoint (/mcp);
	// nil means the hub's default, every tool and prompt prefixed.
	Aggregate *Policy `json:"aggregate,omitempty"`
}

// VirtualServer is one curated endpoint: chosen tools, prompts and
// resources of real servers, under names and descriptions that fit.
type VirtualServer struct {
	// Name is where it is served (/servers/<name>/mcp) and the name tokens
	// and policies allow; the hub's alphabet, [a-z0-9-].
	Name string `json:"name"`
	// Title and Instructions are what initialize (or server/discover)
	// answers in serverInfo.title and instructions.
	Title        string `json:"title,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	// Discovery is how its tools are offered: listed, or found by search.
	Discovery Discovery      `json:"discovery"`
	Tools     []ToolPick     `json:"tools,omitempty"`
	Prompts   []PromptPick   `json:"prompts,omitempty"`
	Resources []ResourcePick `json:"resources,omitempty"`
	// Line is where the entry starts in the file (0 when unknown).
	Line int `json:"line,omitempty"`
}

// Discovery is how a virtual server offers its tools.
type Discovery string

// The discovery modes.
const (
	// DiscoveryList lists every tool in tools/list, as a real server does.
	DiscoveryList Discovery = "list"
	// DiscoverySearch lists only the meta-tools search_tools and call_tool;
	// the tools are found by searching and called by name or through
	// call_tool.
	DiscoverySearch Discovery = "search"
)

// ToolPick chooses tools of one server: by globs (Include, Exclude), or
// one tool by name (Tool) with its own overrides.
type ToolPick struct {
	Server string `yaml:"server" json:"server"`
	// Include and Exclude are path.Match globs on the server's own tool
	// names: a tool is picked when it matches an Include (all, when
	// Include is empty) and no Exclude.
	Include []string `yaml:"include" json:"include,omitempty"`
	Exclude []string `yaml:"exclude" json:"exclude,omitempty"`
	// Tool picks one tool by its exact name; As, Title and Description
	// then rename and describe it.
	Tool        string `yaml:"tool" json:"tool,omitempty"`
	As          string `yaml:"as" json:"as,omitempty"`
	Title       string `yaml:"title" json:"title,omitempty"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Annotations (a JSON object) override members of the tools'
	// annotations, each key replacing the server's.
	Annotations json.RawMessage `yaml:"-" json:"annotations,omitempty"`
	// Fixed (a JSON object) are arguments set on every call: removed from
	// the input schema clients see, refused when a client sends one, and
	// injected into the arguments the server receives.
	Fixed json.RawMessage `yaml:"-" json:"fixed,omitempty"`
	// Line is where the pick starts in the file (0 when unknown).
	Line int `yaml:"-" json:"line,omitempty"`
}

// PromptPick chooses prompts of one server, as ToolPick chooses tools.
type PromptPick struct {
	Server      string   `yaml:"server" json:"server"`
	Include     []string `yaml:"include" json:"include,omitempty"`
	Exclude     []string `yaml:"exclude" json:"exclude,omitempty"`
	Prompt      string   `yaml:"prompt" json:"prompt,omitempty"`
	As          string   `yaml:"as" json:"as,omitempty"`
	Title       string   `yaml:"title" json:"title,omitempty"`
	Description string   `yaml:"description" json:"description,omitempty"`
	Line        int      `yaml:"-" json:"line,omitempty"`
}

// ResourcePick chooses resources and resource templates of one server by
// URI: those under URIPrefix, or those URITemplate (RFC 6570) matches and
// that template itself; with neither, all of them. URIs are never renamed.
type ResourcePick struct {
	Server      string `yaml:"server" json:"server"`
	URIPrefix   string `yaml:"uriPrefix" json:"uriPrefix,omitempty"`
	URITemplate string `yaml:"uriTemplate" json:"uriTemplate,omitempty"`
	Line        int    `yaml:"-" json:"line,omitempty"`
}

// The file's layout as it is decoded: strictly (an unknown field is an
// error), with the free-form objects kept as nodes to convert to JSON.
type (
	fileCatalog struct {
		VirtualServers []fileServer `yaml:"virtualServers"`
		Aggregate      *filePolicy  `yaml:"aggregate"`
	}
	fileServer struct {
		Name         string         `yaml:"name"`
		Title        string         `yaml:"title"`
		Instructions string         `yaml:"instructions"`
		Discovery    Discovery      `yaml:"discovery"`
		Tools        []fileToolPick `yaml:"tools"`
		Prompts      []PromptPick   `yaml:"prompts"`
		Resources    []ResourcePick `yaml:"resources"`
	}
	fileToolPick struct {
		ToolPick    `yaml:",inline"`
		Annotations yaml.Node `yaml:"annotations"`
		Fixed       yaml.Node `yaml:"fixed"`
	}
	filePolicy struct {
		Names    NameMode `yaml:"names"`
		Priority []string `yaml:"priority"`
		Aliases  []Alias  `yaml:"aliases"`
	}
)

// Load reads and parses a catalog file (see Parse).
func Load(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return Parse(b)
}

// Parse parses a catalog file, YAML or JSON, and checks it. Unknown fields
// are errors, as are the mistakes Check finds; the error is an *Error that
// lists every problem with its line. An empty file is an empty catalog.
// Whether a virtual server takes the name of a real server, and what its
// picks match, depends on the servers connected: see CheckNames and Build.
func Parse(b []byte) (*Catalog, error) {
	var f fileCatalog
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Problems: []Problem{{Line: extra.Line, Message: "the file holds more than one document"}}}
	}
	// A second reading, as nodes, says where each entry starts, for the
	// problems found beyond the syntax.
	var root yaml.Node
	_ = yaml.Unmarshal(b, &root)
	pos := positions{root: &root}
	c, probs := f.catalog(pos)
	probs = append(probs, c.check()...)
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	return c, nil
}

// catalog converts the decoded file, noting each entry's line.
func (f *fileCatalog) catalog(pos positions) (*Catalog, []Problem) {
	var probs []Problem
	c := &Catalog{}
	for i, fs := range f.VirtualServers {
		vs := &VirtualServer{Name: fs.Name, Title: fs.Title, Instructions: fs.Instructions, Discovery: fs.Discovery,
			Prompts: fs.Prompts, Resources: fs.Resources, Line: pos.line("virtualServers", i)}
		for j, ft := range fs.Tools {
			line := pos.line("virtualServers", i, "tools", j)
			tp := ft.ToolPick
			tp.Line = line
			var err error
			if tp.Annotations, err = objectJSON(&ft.Annotations); err != nil {
				probs = append(probs, Problem{Line: lineOr(ft.Annotations.Line, line), Message: "annotations: " + err.Error()})
			}
			if tp.Fixed, err = objectJSON(&ft.Fixed); err != nil {
				probs = append(probs, Problem{Line: lineOr(ft.Fixed.Line, line), Message: "fixed: " + err.Error()})
			}
			vs.Tools = append(vs.Tools, tp)
		}
		for j := range vs.Prompts {
			vs.Prompts[j].Line = pos.line("virtualServers", i, "prompts", j)
		}
		for j := range vs.Resources {
			vs.Resources[j].Line = pos.line("virtualServers", i, "resources", j)
		}
		c.VirtualServers = append(c.VirtualServers, vs)
	}
	if p := f.Aggregate; p != nil {
		c.Aggregate = &Policy{Names: p.Names, Priority: p.Priority, Aliases: p.Aliases, Line: pos.line("aggregate")}
		for j := range c.Aggregate.Aliases {
			c.Aggregate.Aliases[j].Line = pos.line("aggregate", "aliases", j)
		}
	}
	return c, probs
}

func lineOr(line, fallback int) int {
	if line > 0 {
		return line
	}
	return fallback
}

// Error is a catalog that cannot be used: every problem found, each with
// its line where known. The previous catalog stays in force.
type Error struct {
	Problems []Problem
}

// Problem is one mistake in a catalog file.
type Problem struct {
	Line    int    `json:"line,omitempty"` // 0 when unknown
	Message string `json:"message"`
}

// String gives the problem as "line N: message".
func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Message)
	}
	return p.Message
}

// Error implements the error interface: every problem, one per line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("catalog: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

var (
	yamlLine       = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknown    = regexp.MustCompile(`field (\S+) not found in type \S+`)
	yamlGoTypeName = regexp.MustCompile(`into (\[\])?(?:\*?catalog\.\w+|map\[[^\]]*\]\S*)`)
)

// yamlError turns a decoding error into an *Error with lines, in the
// file's words rather than Go's.
func yamlError(err error) *Error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	e := &Error{}
	for _, m := range msgs {
		m = yamlUnknown.ReplaceAllString(m, `unknown field "$1"`)
		m = yamlGoTypeName.ReplaceAllStringFunc(m, func(s string) string {
			if strings.HasPrefix(s, "into []") {
				return "into a list"
			}
			return "into an object"
		})
		p := Problem{Message: strings.TrimPrefix(m, "yaml: ")}
		if sm := yamlLine.FindStringSubmatch(m); sm != nil {
			fmt.Sscan(sm[1], &p.Line)
			p.Message = sm[2]
		}
		e.Problems = append(e.Problems, p)
	}
	return e
}

// positions finds the line of an entry of the file by its path.
type positions struct{ root *yaml.Node }

// line returns the line of the node at path (mapping keys and sequence
// indices), or 0.
func (p positions) line(path ...any) int {
	n := p.root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, step := range path {
		if n == nil {
			return 0
		}
		switch s := step.(type) {
		case string:
			n = mappingValue(n, s)
		case int:
			if n.Kind != yaml.SequenceNode || s >= len(n.Content) {
				return 0
			}
			n = n.Content[s]
		}
	}
	if n == nil {
		return 0
	}
	return n.Line
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

var errNotObject = errors.New("must be an object")

// objectJSON converts a YAML mapping to a JSON object; an absent node is
// nil. Anchors and aliases are refused: an alias may expand without bound,
// and a file of arguments has no need of them.
func objectJSON(n *yaml.Node) (json.RawMessage, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, errNotObject
	}
	b, err := appendJSON(nil, n)
	if err != nil {
		return nil, err
	}
	return b, nil
}

var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

// appendJSON appends the JSON form of a YAML node.
func appendJSON(b []byte, n *yaml.Node) ([]byte, error) {
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return nil, fmt.Errorf("line %d: anchors and aliases are not supported here", n.Line)
	}
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: keys must be plain strings", k.Line)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonrpc.AppendString(b, k.Value)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, v); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, v := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, v); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.ScalarNode:
		return appendScalar(b, n)
	}
	return nil, fmt.Errorf("line %d: not a JSON value", n.Line)
}

// appendScalar appends a scalar: numbers as written when JSON can say
// them so (no precision lost), other numbers and booleans as YAML reads
// them, null, and everything else as a string.
func appendScalar(b []byte, n *yaml.Node) ([]byte, error) {
	switch n.ShortTag() {
	case "!!null":
		return append(b, "null"...), nil
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return fmt.Appendf(b, "%t", v), nil
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			return append(b, n.Value...), nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s is not a JSON number", n.Line, n.Value)
		}
		return append(b, raw...), nil
	}
	return jsonrpc.AppendString(b, n.Value), nil
}
