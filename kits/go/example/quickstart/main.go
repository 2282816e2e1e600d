// The Go quick start of README.md: submit a task to an agent and watch its
// signed events. go run . http://127.0.0.1:8080
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	synapse "github.com/synapse-connect/synapse-go"
)

func main() {
	ctx := context.Background()
	me, _ := synapse.NewIdentity()        // a fresh key; its agent id is derived from it
	conn, err := synapse.Dial(os.Args[1]) // gRPC; http:// is HTTP/2 cleartext
	if err != nil {
		log.Fatal(err)
	}
	client, err := synapse.NewClient(ctx, conn, me, synapse.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sent, err := client.Submit(ctx, "text_analysis", map[string]any{"text": "Agents talk. They sign."}, synapse.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for item, err := range client.Watch(ctx, sent.TaskID, 1) { // every event verified
		if err != nil {
			log.Fatal(err)
		}
		if item.Event != nil {
			fmt.Println(item.Event.Header.GetSequence(), item.Event.Type())
		}
	}
}
