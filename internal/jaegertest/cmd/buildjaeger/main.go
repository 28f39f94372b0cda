// Command buildjaeger builds the Jaeger that the tests run (see package
// jaegertest) into the user's cache directory, unless it is there already,
// and prints its path. `make deps` runs it, so that the first test that
// needs Jaeger does not spend minutes building it.
package main

import (
	"fmt"
	"os"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
)

func main() {
	bin, err := jaegertest.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
