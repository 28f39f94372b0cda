package mcp

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Meta is the _meta member that requests, results and items may carry.
type Meta map[string]any

// Implementation names a client or server.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// ClientCapabilities are what a client can do for servers.
type ClientCapabilities struct {
	Sampling     *SamplingCap    `json:"sampling,omitempty"`
	Elicitation  *ElicitationCap `json:"elicitation,omitempty"`
	Roots        *ListChangedCap `json:"roots,omitempty"`
	Experimental map[string]any  `json:"experimental,omitempty"`
	// Extensions are the extensions the client supports (protocol version
	// 2026-07-28), by identifier, each with its settings (an empty object
	// for none), such as ExtensionTasks.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// HasExtension reports whether the client declared the extension id.
func (c ClientCapabilities) HasExtension(id string) bool {
	_, ok := c.Extensions[id]
	return ok
}

// SamplingCap declares sampling support, and whether the client honours
// includeContext and tools in a sampling request.
type SamplingCap struct {
	Context *struct{} `json:"context,omitempty"`
	Tools   *struct{} `json:"tools,omitempty"`
}

// ElicitationCap declares elicitation support and its modes. An empty
// object means form mode, as before modes existed.
type ElicitationCap struct {
	Form *struct{} `json:"form,omitempty"`
	URL  *struct{} `json:"url,omitempty"`
}

// ListChangedCap declares that a list can change, with notifications.
type ListChangedCap struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCap declares resource support.
type ResourcesCap struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// ServerCapabilities are what a server offers.
type ServerCapabilities struct {
	Tools        *ListChangedCap `json:"tools,omitempty"`
	Resources    *ResourcesCap   `json:"resources,omitempty"`
	Prompts      *ListChangedCap `json:"prompts,omitempty"`
	Completions  *struct{}       `json:"completions,omitempty"`
	Logging      *struct{}       `json:"logging,omitempty"`
	Experimental map[string]any  `json:"experimental,omitempty"`
	// Extensions are the extensions the server supports (protocol version
	// 2026-07-28: server/discover), by identifier, each with its settings.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Has reports whether the capabilities hold one named as the method table
// names them (MethodSpec.ServerCap: "tools", "resources", "prompts",
// "completions", "logging", or an extension's identifier such as
// ExtensionTasks); "" names none, which every server has.
func (c ServerCapabilities) Has(capability string) bool {
	switch capability {
	case "tools":
		return c.Tools != nil
	case "resources":
		return c.Resources != nil
	case "prompts":
		return c.Prompts != nil
	case "completions":
		return c.Completions != nil
	case "logging":
		return c.Logging != nil
	case ExtensionTasks:
		_, ok := c.Extensions[capability]
		return ok
	}
	return true
}

// InitializeParams open a session.
type InitializeParams struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ClientCapabilities `json:"capabilities"`
	ClientInfo      Implementation     `json:"clientInfo"`
	Meta            Meta               `json:"_meta,omitempty"`
}

// InitializeResult answers initialize.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
	Meta            Meta               `json:"_meta,omitempty"`
}

// PaginatedParams carry a list request's cursor.
type PaginatedParams struct {
	Cursor string `json:"cursor,omitempty"`
	Meta   Meta   `json:"_meta,omitempty"`
}

// Tool describes a tool.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  map[string]any  `json:"annotations,omitempty"`
	Meta         Meta            `json:"_meta,omitempty"`
}

// ListToolsResult is one page of tools.
type ListToolsResult struct {
	Tools      []*Tool `json:"tools"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// CallToolParams call a tool. InputResponses and RequestState are those
// of a retry (protocol version 2026-07-28): the answers to the input
// requests of the previous round, by key, and its state, echoed.
type CallToolParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	Meta           Meta                       `json:"_meta,omitempty"`
}

// CallToolResult is a tool's answer. IsError marks a failure the model
// should see, as opposed to a protocol error.
//
// A handler that needs input from the client first (sampling, elicitation,
// roots) returns InputRequests instead of content, and RequestState if it
// wants it back: see ToolRequest.
type CallToolResult struct {
	Content           []Content               `json:"content"`
	StructuredContent any                     `json:"structuredContent,omitempty"`
	IsError           bool                    `json:"isError,omitempty"`
	InputRequests     map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState      string                  `json:"requestState,omitempty"`
	Meta              Meta                    `json:"_meta,omitempty"`
}

// Content is a content block: text, image, audio, resource_link or an
// embedded resource. Type says which fields are set.
type Content struct {
	Type        string            `json:"type"`
	Text        string            `json:"text,omitempty"`
	Data        string            `json:"data,omitempty"`     // base64, for image and audio
	MIMEType    string            `json:"mimeType,omitempty"` // image, audio, resource_link
	URI         string            `json:"uri,omitempty"`      // resource_link
	Name        string            `json:"name,omitempty"`     // resource_link
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Resource    *ResourceContents `json:"resource,omitempty"` // resource (embedded)
	Annotations map[string]any    `json:"annotations,omitempty"`
	Meta        Meta              `json:"_meta,omitempty"`
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// ImageContent returns an image block; data is base64.
func ImageContent(data, mimeType string) Content {
	return Content{Type: "image", Data: data, MIMEType: mimeType}
}

// AudioContent returns an audio block; data is base64.
func AudioContent(data, mimeType string) Content {
	return Content{Type: "audio", Data: data, MIMEType: mimeType}
}

// ResourceLink returns a link to a resource.
func ResourceLink(uri, name, mimeType string) Content {
	return Content{Type: "resource_link", URI: uri, Name: name, MIMEType: mimeType}
}

// EmbeddedResource returns a block that embeds a resource's contents.
func EmbeddedResource(rc ResourceContents) Content {
	return Content{Type: "resource", Resource: &rc}
}

// Resource describes a resource.
type Resource struct {
	URI         string         `json:"uri"`
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	MIMEType    string         `json:"mimeType,omitempty"`
	Size        int64          `json:"size,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
	Meta        Meta           `json:"_meta,omitempty"`
}

// ResourceTemplate describes a family of resources by an RFC 6570 template.
type ResourceTemplate struct {
	URITemplate string         `json:"uriTemplate"`
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	MIMEType    string         `json:"mimeType,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
	Meta        Meta           `json:"_meta,omitempty"`
}

// ListResourcesResult is one page of resources.
type ListResourcesResult struct {
	Resources  []*Resource `json:"resources"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// ListResourceTemplatesResult is one page of resource templates.
type ListResourceTemplatesResult struct {
	ResourceTemplates []*ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string              `json:"nextCursor,omitempty"`
}

// ResourceParams name a resource, for read, subscribe and unsubscribe;
// InputResponses and RequestState are those of a retried read, as in
// CallToolParams.
type ResourceParams struct {
	URI            string                     `json:"uri"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	Meta           Meta                       `json:"_meta,omitempty"`
}

// ResourceContents are a resource's contents: Text or Blob (base64).
type ResourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
	Meta     Meta   `json:"_meta,omitempty"`
}

// ReadResourceResult answers resources/read; InputRequests and
// RequestState ask for input first, as in CallToolResult.
type ReadResourceResult struct {
	Contents      []ResourceContents      `json:"contents"`
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                  `json:"requestState,omitempty"`
	Meta          Meta                    `json:"_meta,omitempty"`
}

// ResourceUpdatedParams say a subscribed resource changed.
type ResourceUpdatedParams struct {
	URI  string `json:"uri"`
	Meta Meta   `json:"_meta,omitempty"`
}

// Prompt describes a prompt template.
type Prompt struct {
	Name        string            `json:"name"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Arguments   []*PromptArgument `json:"arguments,omitempty"`
	Meta        Meta              `json:"_meta,omitempty"`
}

// PromptArgument describes one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ListPromptsResult is one page of prompts.
type ListPromptsResult struct {
	Prompts    []*Prompt `json:"prompts"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// GetPromptParams ask for a prompt with arguments; InputResponses and
// RequestState are those of a retry, as in CallToolParams.
type GetPromptParams struct {
	Name           string                     `json:"name"`
	Arguments      map[string]string          `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	Meta           Meta                       `json:"_meta,omitempty"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// GetPromptResult answers prompts/get; InputRequests and RequestState ask
// for input first, as in CallToolResult.
type GetPromptResult struct {
	Description   string                  `json:"description,omitempty"`
	Messages      []*PromptMessage        `json:"messages"`
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                  `json:"requestState,omitempty"`
	Meta          Meta                    `json:"_meta,omitempty"`
}

// CompleteParams ask for completions of an argument.
type CompleteParams struct {
	Ref      CompleteRef      `json:"ref"`
	Argument CompleteArgument `json:"argument"`
	Context  *CompleteContext `json:"context,omitempty"`
	Meta     Meta             `json:"_meta,omitempty"`
}

// CompleteRef names what is completed: a prompt (Type "ref/prompt", Name)
// or a resource template (Type "ref/resource", URI).
type CompleteRef struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompleteArgument is the argument being completed.
type CompleteArgument struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CompleteContext carries arguments already resolved.
type CompleteContext struct {
	Arguments map[string]string `json:"arguments,omitempty"`
}

// CompleteResult answers completion/complete.
type CompleteResult struct {
	Completion Completion `json:"completion"`
}

// Completion holds completion values.
type Completion struct {
	Values  []string `json:"values"`
	Total   int      `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// SetLevelParams set the minimum level of log messages a client receives.
type SetLevelParams struct {
	Level LoggingLevel `json:"level"`
}

// LoggingMessageParams are a log message from a server.
type LoggingMessageParams struct {
	Level  LoggingLevel `json:"level"`
	Logger string       `json:"logger,omitempty"`
	Data   any          `json:"data"`
	Meta   Meta         `json:"_meta,omitempty"`
}

// ProgressParams report progress on a request.
type ProgressParams struct {
	ProgressToken any     `json:"progressToken"`
	Progress      float64 `json:"progress"`
	Total         float64 `json:"total,omitempty"`
	Message       string  `json:"message,omitempty"`
}

// CancelledParams cancel a request.
type CancelledParams struct {
	RequestID jsonrpc.ID `json:"requestId"`
	Reason    string     `json:"reason,omitempty"`
}

// SamplingMessage is one message of a sampling conversation.
type SamplingMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// CreateMessageParams ask the client's model for a message.
type CreateMessageParams struct {
	Messages         []SamplingMessage `json:"messages"`
	MaxTokens        int               `json:"maxTokens"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	ModelPreferences map[string]any    `json:"modelPreferences,omitempty"`
	Metadata         map[string]any    `json:"metadata,omitempty"`
	Meta             Meta              `json:"_meta,omitempty"`
}

// CreateMessageResult is the model's message.
type CreateMessageResult struct {
	Role       string  `json:"role"`
	Content    Content `json:"content"`
	Model      string  `json:"model"`
	StopReason string  `json:"stopReason,omitempty"`
	Meta       Meta    `json:"_meta,omitempty"`
}

// ElicitParams ask the user for structured input.
type ElicitParams struct {
	Mode            string          `json:"mode,omitempty"` // "form" (default) or "url"
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
	Meta            Meta            `json:"_meta,omitempty"`
}

// ElicitResult is the user's answer: Action is "accept", "decline" or
// "cancel"; Content holds the form's values when accepted.
type ElicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
	Meta    Meta           `json:"_meta,omitempty"`
}

// Root is a directory or file the client exposes to servers.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ListRootsResult answers roots/list.
type ListRootsResult struct {
	Roots []Root `json:"roots"`
}
