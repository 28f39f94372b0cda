package pubsub_test

import (
	"context"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

func ExampleMemory() {
	ctx := context.Background()
	b := pubsub.NewMemory()
	defer b.Close()

	got := make(chan string)
	sub, err := b.Subscribe(ctx, "resources/updated", func(ctx context.Context, topic string, payload []byte) {
		got <- topic + ": " + string(payload)
	})
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	if err := b.Publish(ctx, "resources/updated", []byte(`{"uri":"file:///a.txt"}`)); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: resources/updated: {"uri":"file:///a.txt"}
}
