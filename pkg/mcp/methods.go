package mcp

import (
	"sort"
	"strconv"
)

// Direction says which side sends a method.
type Direction uint8

// The directions.
const (
	// ClientToServer: sent by a client (for the hub: by its clients, and by
	// the hub to its servers).
	ClientToServer Direction = 1 << iota
	// ServerToClient: sent by a server (for the hub: by its servers, and by
	// the hub to its clients).
	ServerToClient
	// BothWays: either side may send it (ping, progress, cancellation).
	BothWays = ClientToServer | ServerToClient
)

// Era is a set of protocol revisions that share a shape: the session-based
// ones, which open with initialize, and the stateless one, 2026-07-28, where
// every request describes itself.
type Era uint8

// The eras.
const (
	// SessionEra is 2024-11-05 to 2025-11-25.
	SessionEra Era = 1 << iota
	// StatelessEra is 2026-07-28.
	StatelessEra
	// AllEras is both.
	AllEras = SessionEra | StatelessEra
)

// Relay says what the hub, standing between clients and servers, does with
// a notification: where it passes it on, if anywhere. Every notification of
// every revision has one; a request has none (RelayNone), since the
// capability it needs (ServerCap, ClientCap) says where it goes.
type Relay uint8

// The relays.
const (
	// RelayNone: a request.
	RelayNone Relay = iota
	// RelayConsumed: it ends at the hop it arrives on, which acts on it
	// (initialized; subscriptions/acknowledged, of a listen stream the hub
	// opened itself).
	RelayConsumed
	// RelayToRequest: it is about one request in flight, and goes to the
	// other end of that request: progress by its token, cancelled by the
	// request's id.
	RelayToRequest
	// RelayToSubscribers: to every client subscribed to its resource, on
	// every instance.
	RelayToSubscribers
	// RelayListChanged: the other side's copy of a list is stale. A
	// server's tools, resources or prompts are listed again and the clients
	// told; a client's roots/list_changed goes to the servers serving its
	// calls.
	RelayListChanged
	// RelayLog: to the client of the call it names, else to every client
	// whose logging level admits it.
	RelayLog
	// RelayToElicitor: to the client that its elicitationId's URL-mode
	// elicitation went to.
	RelayToElicitor
	// RelayNotRouted: never passed on (the hub counts and logs it): nothing
	// the hub negotiates produces it, as the hub declares no tasks to
	// either side.
	RelayNotRouted
)

var relayNames = [...]string{"none", "consumed", "to-request", "to-subscribers", "list-changed", "log", "to-elicitor", "not-routed"}

// String returns the relay's name, as docs/protocol.md uses it.
func (r Relay) String() string {
	if int(r) < len(relayNames) {
		return relayNames[r]
	}
	return "relay(" + strconv.Itoa(int(r)) + ")"
}

// MethodSpec describes one MCP request or notification: who sends it, what
// capability it needs of the other side, which revisions define it and, for
// a notification, what the hub does with it. It is the one table the Go
// helpers, the hub's dispatch and its metrics read.
type MethodSpec struct {
	Name         string
	Notification bool
	Direction    Direction
	// ServerCap is the server capability a client's request needs: "tools",
	// "resources", "prompts", "completions" or "logging", or the identifier
	// of an extension (ExtensionTasks); "" for none.
	ServerCap string
	// ClientCap is the client capability a server's request needs:
	// "sampling", "elicitation" or "roots"; "" for none.
	ClientCap string
	// Eras are the revisions that define the method.
	Eras Era
	// Relay is what the hub does with the notification.
	Relay Relay
	// Extension is the extension that defines the method, within its
	// revisions (Eras); "" for one of the protocol's own.
	Extension string
}

var methodTable = func() map[string]*MethodSpec {
	specs := []MethodSpec{
		{Name: MethodInitialize, Direction: ClientToServer, Eras: SessionEra},
		{Name: MethodServerDiscover, Direction: ClientToServer, Eras: StatelessEra},
		{Name: MethodSubscriptionsListen, Direction: ClientToServer, Eras: StatelessEra},
		{Name: MethodPing, Direction: BothWays, Eras: SessionEra},
		{Name: MethodToolsList, Direction: ClientToServer, ServerCap: "tools", Eras: AllEras},
		{Name: MethodToolsCall, Direction: ClientToServer, ServerCap: "tools", Eras: AllEras},
		{Name: MethodResourcesList, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesTemplatesList, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesRead, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesSubscribe, Direction: ClientToServer, ServerCap: "resources", Eras: SessionEra},
		{Name: MethodResourcesUnsubscribe, Direction: ClientToServer, ServerCap: "resources", Eras: SessionEra},
		{Name: MethodPromptsList, Direction: ClientToServer, ServerCap: "prompts", Eras: AllEras},
		{Name: MethodPromptsGet, Direction: ClientToServer, ServerCap: "prompts", Eras: AllEras},
		{Name: MethodCompletionComplete, Direction: ClientToServer, ServerCap: "completions", Eras: AllEras},
		{Name: MethodLoggingSetLevel, Direction: ClientToServer, ServerCap: "logging", Eras: SessionEra},
		{Name: MethodSamplingCreateMessage, Direction: ServerToClient, ClientCap: "sampling", Eras: SessionEra},
		{Name: MethodElicitationCreate, Direction: ServerToClient, ClientCap: "elicitation", Eras: SessionEra},
		{Name: MethodRootsList, Direction: ServerToClient, ClientCap: "roots", Eras: SessionEra},

		// The tasks extension (tasks.go).
		{Name: MethodTasksGet, Direction: ClientToServer, ServerCap: ExtensionTasks, Eras: StatelessEra, Extension: ExtensionTasks},
		{Name: MethodTasksUpdate, Direction: ClientToServer, ServerCap: ExtensionTasks, Eras: StatelessEra, Extension: ExtensionTasks},
		{Name: MethodTasksCancel, Direction: ClientToServer, ServerCap: ExtensionTasks, Eras: StatelessEra, Extension: ExtensionTasks},

		{Name: NotificationInitialized, Notification: true, Direction: ClientToServer, Eras: SessionEra, Relay: RelayConsumed},
		{Name: NotificationProgress, Notification: true, Direction: BothWays, Eras: AllEras, Relay: RelayToRequest},
		{Name: NotificationCancelled, Notification: true, Direction: BothWays, Eras: AllEras, Relay: RelayToRequest},
		{Name: NotificationMessage, Notification: true, Direction: ServerToClient, ServerCap: "logging", Eras: AllEras, Relay: RelayLog},
		{Name: NotificationResourceUpdated, Notification: true, Direction: ServerToClient, ServerCap: "resources", Eras: AllEras, Relay: RelayToSubscribers},
		{Name: NotificationResourcesListChanged, Notification: true, Direction: ServerToClient, ServerCap: "resources", Eras: AllEras, Relay: RelayListChanged},
		{Name: NotificationToolsListChanged, Notification: true, Direction: ServerToClient, ServerCap: "tools", Eras: AllEras, Relay: RelayListChanged},
		{Name: NotificationPromptsListChanged, Notification: true, Direction: ServerToClient, ServerCap: "prompts", Eras: AllEras, Relay: RelayListChanged},
		{Name: NotificationRootsListChanged, Notification: true, Direction: ClientToServer, ClientCap: "roots", Eras: SessionEra, Relay: RelayListChanged},
		{Name: NotificationElicitationComplete, Notification: true, Direction: ServerToClient, ClientCap: "elicitation", Eras: SessionEra, Relay: RelayToElicitor},
		{Name: NotificationTasksStatus, Notification: true, Direction: BothWays, Eras: SessionEra, Relay: RelayNotRouted},
		{Name: NotificationSubscriptionsAcknowledged, Notification: true, Direction: ServerToClient, Eras: StatelessEra, Relay: RelayConsumed},
		{Name: NotificationTasks, Notification: true, Direction: ServerToClient, ServerCap: ExtensionTasks, Eras: StatelessEra,
			Extension: ExtensionTasks, Relay: RelayNotRouted},
	}
	m := make(map[string]*MethodSpec, len(specs))
	for i := range specs {
		m[specs[i].Name] = &specs[i]
	}
	return m
}()

// LookupMethod returns the spec of a method MCP defines.
func LookupMethod(name string) (*MethodSpec, bool) {
	s, ok := methodTable[name]
	return s, ok
}

// Methods returns every method MCP defines, sorted by name.
func Methods() []*MethodSpec {
	out := make([]*MethodSpec, 0, len(methodTable))
	for _, s := range methodTable {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NameMember returns the member of a request's params that the Mcp-Name
// header of Streamable HTTP mirrors (SEP-2243, and SEP-2663 for the tasks
// extension): "name" for tools/call and prompts/get, "uri" for
// resources/read, "taskId" for tasks/get, tasks/update and tasks/cancel;
// "" for a method that has none.
func NameMember(method string) string {
	switch method {
	case MethodToolsCall, MethodPromptsGet:
		return "name"
	case MethodResourcesRead:
		return "uri"
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel:
		return "taskId"
	}
	return ""
}
