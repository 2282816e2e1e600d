// Checks (g) and (h), the kit's Agent on a plain grpc-go server (HTTP/2
// only, no Connect, no HTTP/1.1):
//
// (g) it registers at the server's registry (which calls it back) and
// receives the signed callbacks of a task it requested there: its endpoint
// URL names no protocol, so the server finds out that it speaks HTTP/2 only
// and calls it with gRPC (docs/PROTOCOL.md §1.1);
//
// (h) it serves a task type of its own, "reverse": the kit's Client submits
// to it and watches, and, with -cli, so does the TypeScript command line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc"

	synapse "github.com/synapse-connect/synapse-go"
	"github.com/synapse-connect/synapse-go/synapsev1"
)

// startAgent serves agent on a loopback port; it returns the base URL and a stop function.
func startAgent(agent *synapse.Agent) (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer()
	agent.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	return "http://" + lis.Addr().String(), srv.Stop, nil
}

func checkRegisteredAgent(r *report, url string) {
	names := []string{"grpc-agent/serve", "grpc-agent/register", "grpc-agent/callbacks-signed", "grpc-agent/deregister"}
	conn, err := synapse.Dial(url)
	if err != nil {
		r.skip(names, err.Error())
		return
	}
	defer conn.Close()
	var client *synapse.Client
	var agent *synapse.Agent
	var endpoint string
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	if !r.check(names[0], func() error {
		me, err := synapse.NewIdentity()
		if err != nil {
			return err
		}
		ctx, cancel := rpcContext(10 * time.Second)
		defer cancel()
		if client, err = synapse.NewClient(ctx, conn, me, synapse.ClientOptions{}); err != nil {
			return err
		}
		agent = synapse.NewAgent(me, synapse.AgentOptions{Name: "Go interop agent (grpc-go only)"})
		if endpoint, stop, err = startAgent(agent); err != nil {
			return err
		}
		logf("gRPC-only agent %s at %s", me.AgentID, endpoint)
		return nil
	}) {
		r.skip(names[1:], "no agent")
		return
	}
	registry := synapsev1.NewRegistryServiceClient(conn)
	if !r.check(names[1], func() error { return register(client, agent, registry, endpoint) }) {
		r.skip(names[2:], "not registered")
		return
	}
	r.check(names[2], func() error { return callbacks(client, agent, endpoint) })
	r.check(names[3], func() error {
		env, _, err := synapse.Seal(client.Identity(), synapse.Message{
			Type: synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_DEREGISTER, Payload: &synapsev1.AgentDeregistrationPayload{Reason: "interop run done"},
			Receiver: client.Executor,
		})
		if err != nil {
			return err
		}
		ctx, cancel := rpcContext(10 * time.Second)
		defer cancel()
		_, err = registry.Deregister(ctx, &synapsev1.DeregisterRequest{Envelope: env})
		return err
	})
}

// register sends a signed registry:register; the registry calls the agent
// back (GetCapabilities, GetSupportedInterfaces) before it answers.
func register(client *synapse.Client, agent *synapse.Agent, registry synapsev1.RegistryServiceClient, endpoint string) error {
	me := agent.Identity()
	env, _, err := synapse.Seal(me, synapse.Message{
		Type: synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_REGISTER,
		Payload: &synapsev1.AgentRegistrationPayload{Capabilities: agent.Capabilities(), Interfaces: agent.Interfaces(),
			EndpointUrl: endpoint, PublicKey: me.PublicKey},
		Receiver: client.Executor,
	})
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	resp, err := registry.Register(ctx, &synapsev1.RegisterRequest{Envelope: env})
	if err != nil {
		return fmt.Errorf("Register: %v", err)
	}
	got := resp.GetAgent()
	if got.GetCapabilities().GetAgentId() != me.AgentID || got.GetEndpointUrl() != endpoint {
		return fmt.Errorf("registered %q at %q", got.GetCapabilities().GetAgentId(), got.GetEndpointUrl())
	}
	if got.GetComplianceLevel() != synapsev1.Compliance_COMPLIANCE_BASIC {
		return fmt.Errorf("compliance level %v, want COMPLIANCE_BASIC", got.GetComplianceLevel())
	}
	return nil
}

// callbacks asks the server for a text_analysis task with callback_url =
// the agent; the agent verifies every pushed envelope (signed by the
// executor, addressed to it, fresh, the next in sequence) and acknowledges it.
func callbacks(client *synapse.Client, agent *synapse.Agent, endpoint string) error {
	taskID := synapse.NewUUID()
	pushed := agent.ExpectCallbacks(client.Executor, taskID)
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	if _, err := client.Submit(ctx, "text_analysis", map[string]any{"text": taskText}, synapse.SubmitOptions{TaskID: taskID, CallbackURL: endpoint}); err != nil {
		return fmt.Errorf("Send: %v", err)
	}
	var last *synapse.Opened
	n := 0
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case o, ok := <-pushed:
			if !ok {
				done = true
				break
			}
			n++
			if o.Header.GetTaskId() != taskID || o.Header.GetSequence() != uint64(n) {
				return fmt.Errorf("pushed envelope %d is event %d of task %q", n, o.Header.GetSequence(), o.Header.GetTaskId())
			}
			last = o
		case <-timeout:
			return fmt.Errorf("no task_complete pushed within 20 s (%d envelopes pushed)", n)
		}
	}
	if last == nil || last.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
		return fmt.Errorf("the last of %d pushed envelopes is not task_complete", n)
	}
	logf("%d signed callbacks verified", n)
	return checkOutput(last.Payload.(*synapsev1.TaskCompletePayload).GetResult())
}

// reverse is the own agent's task type: it reverses input.text.
func reverse(_ context.Context, task *synapse.Task) (any, error) {
	text := []rune(task.Input.GetFields()["text"].GetStringValue())
	if err := task.Progress(50, "reversing"); err != nil {
		return nil, err
	}
	for i, j := 0, len(text)-1; i < j; i, j = i+1, j-1 {
		text[i], text[j] = text[j], text[i]
	}
	return map[string]any{"reversed": string(text)}, nil
}

func checkOwnAgent(r *report, cli string) {
	names := []string{"kit-agent/go-client", "kit-agent/go-client-confidential", "kit-agent/typescript-cli", "kit-agent/typescript-cli-confidential"}
	me, err := synapse.NewIdentity()
	if err != nil {
		r.skip(names, err.Error())
		return
	}
	agent := synapse.NewAgent(me, synapse.AgentOptions{Name: "Go kit agent", TaskTypes: []synapse.TaskType{
		{Type: "reverse", Name: "Reverse a text", Handler: reverse},
		// Taken only confidential: a request in the clear is refused.
		{Type: "reverse_secret", Name: "Reverse a secret text", Handler: reverse, RequiresConfidentiality: true},
	}})
	url, stop, err := startAgent(agent)
	if err != nil {
		r.skip(names, err.Error())
		return
	}
	defer stop()
	r.check(names[0], func() error { return submitToOwnAgent(url) })
	r.check(names[1], func() error { return submitConfidentialToOwnAgent(url) })
	if cli == "" {
		r.skip(names[2:], "no -cli")
		return
	}
	r.check(names[2], func() error { return cliSubmits(cli, url) })
	r.check(names[3], func() error { return cliSubmitsConfidential(cli, url) })
}

// submitToOwnAgent: the kit's Client submits "reverse" and watches it.
func submitToOwnAgent(url string) error {
	conn, err := synapse.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	me, err := synapse.NewIdentity()
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(20 * time.Second)
	defer cancel()
	client, err := synapse.NewClient(ctx, conn, me, synapse.ClientOptions{})
	if err != nil {
		return err
	}
	sent, err := client.Submit(ctx, "reverse", map[string]any{"text": "Synapse"}, synapse.SubmitOptions{})
	if err != nil {
		return err
	}
	var types []string
	var output string
	for item, err := range client.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			return err
		}
		if item.Event != nil {
			types = append(types, strings.TrimPrefix(item.Event.Type().String(), "MESSAGE_TYPE_"))
			if c, ok := item.Event.Payload.(*synapsev1.TaskCompletePayload); ok {
				output = c.GetResult().GetOutput().GetStructValue().GetFields()["reversed"].GetStringValue()
			}
		}
	}
	if strings.Join(types, ",") != "TASK_CONFIRM,TASK_STATUS_UPDATE,TASK_COMPLETE" || output != "espanyS" {
		return fmt.Errorf("events %v, output %q", types, output)
	}
	return nil
}

// cliSubmits: `synapse submit URL --protocol grpc --type reverse --watch
// --json` (the TypeScript client, which checks every event's signature and
// the state machine) against the Go agent.
func cliSubmits(cli, url string) error {
	home, err := os.MkdirTemp("", "synapse-cli-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	ctx, cancel := rpcContext(60 * time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", cli, "submit", url, "--protocol", "grpc", "--type", "reverse",
		"--payload", `{"text":"Go kit"}`, "--watch", "--json", "--home", home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "event" {
			states = append(states, ev.State)
		}
	}
	if len(states) == 0 || states[len(states)-1] != "COMPLETED" || !strings.Contains(string(out), "tik oG") {
		return fmt.Errorf("the command line saw states %v:\n%s", states, out)
	}
	logf("typescript cli: %v", states)
	return nil
}
