package tracing

import (
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// The attribute names of OpenTelemetry's semantic conventions that the
// hub's spans use. The MCP conventions (mcp.*, and the gen_ai.* names they
// borrow) are those of semantic conventions 1.41, the last release of the
// main repository to hold them before they moved to the GenAI conventions'
// own repository with the same names; error.type and
// rpc.response.status_code are recorded as the MCP conventions say: the
// JSON-RPC error code as a string.
const (
	attrMCPMethod    = semconv.McpMethodNameKey         // mcp.method.name
	attrMCPProtocol  = semconv.McpProtocolVersionKey    // mcp.protocol.version
	attrSessionID    = semconv.McpSessionIDKey          // mcp.session.id
	attrResourceURI  = semconv.McpResourceURIKey        // mcp.resource.uri
	attrToolName     = semconv.GenAIToolNameKey         // gen_ai.tool.name
	attrPromptName   = semconv.GenAIPromptNameKey       // gen_ai.prompt.name
	attrOperation    = semconv.GenAIOperationNameKey    // gen_ai.operation.name
	attrRequestID    = semconv.JSONRPCRequestIDKey      // jsonrpc.request.id
	attrErrorType    = semconv.ErrorTypeKey             // error.type
	attrStatusCode   = semconv.RPCResponseStatusCodeKey // rpc.response.status_code
	attrNetProtocol  = semconv.NetworkProtocolNameKey   // network.protocol.name
	attrNetTransport = semconv.NetworkTransportKey      // network.transport
)
