// Command askserver runs askserver on its standard input and output, as
// desktop clients run a published server.
package main

import (
	"context"
	"log"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/e2e/gosdk/askserver"
)

func main() {
	if err := askserver.New().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
