// Check (f): a Go agent that serves gRPC only (a plain grpc-go server on
// 127.0.0.1, no Connect, no HTTP/1.1) registers at the server's registry and
// receives the signed callbacks of a task it requested. Its endpoint URL
// names no protocol: the server finds out that it speaks HTTP/2 only and
// calls it with gRPC (docs/PROTOCOL.md §1.1). Every pushed envelope is
// verified with crypto/ed25519 against the executor's key.
package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

// basicInterfaces are the 8 basic standard interfaces (PROTOCOL.md §4), all
// a registry requires.
var basicInterfaces = []struct {
	name     string
	category synapsev1.InterfaceCategory
}{
	{"AgentIdentity", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"MessageHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"CapabilitiesProvider", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_CORE},
	{"P2PTaskHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_P2P},
	{"CallbackReceiver", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_P2P},
	{"HTTPTransport", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_TRANSPORT},
	{"Authenticator", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_SECURITY},
	{"IdempotencyHandler", synapsev1.InterfaceCategory_INTERFACE_CATEGORY_SECURITY},
}

// grpcAgent is the agent's side: its identity, what it declares, and the
// callbacks it has received.
type grpcAgent struct {
	synapsev1.UnimplementedCapabilitiesServiceServer
	synapsev1.UnimplementedP2PServiceServer
	me       identity
	executor peer

	mu       sync.Mutex
	pushed   []*synapsev1.Envelope
	complete chan struct{}
	closed   bool
}

func (a *grpcAgent) capabilities() *synapsev1.AgentCapabilities {
	return &synapsev1.AgentCapabilities{
		AgentId:                 a.me.agentID,
		AgentName:               "Go interop agent (grpc-go only)",
		ProtocolVersion:         protocolVersion,
		PublicKey:               a.me.pub,
		KeyId:                   a.me.keyID,
		SupportedTransportModes: []synapsev1.TransportMode{synapsev1.TransportMode_TRANSPORT_MODE_CALLBACK},
	}
}

func (a *grpcAgent) interfaces() []*synapsev1.ImplementedInterface {
	out := make([]*synapsev1.ImplementedInterface, 0, len(basicInterfaces))
	for _, i := range basicInterfaces {
		out = append(out, &synapsev1.ImplementedInterface{Name: i.name, Category: i.category, ComplianceLevel: synapsev1.Compliance_COMPLIANCE_BASIC, Version: "1.0.0"})
	}
	return out
}

func (a *grpcAgent) GetCapabilities(context.Context, *synapsev1.GetCapabilitiesRequest) (*synapsev1.GetCapabilitiesResponse, error) {
	return &synapsev1.GetCapabilitiesResponse{Capabilities: a.capabilities()}, nil
}

func (a *grpcAgent) GetSupportedInterfaces(context.Context, *synapsev1.GetSupportedInterfacesRequest) (*synapsev1.GetSupportedInterfacesResponse, error) {
	return &synapsev1.GetSupportedInterfacesResponse{Interfaces: a.interfaces()}, nil
}

// Send keeps every pushed envelope; the check verifies them afterwards.
func (a *grpcAgent) Send(_ context.Context, req *synapsev1.SendRequest) (*synapsev1.SendResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pushed = append(a.pushed, req.GetEnvelope())
	if o, err := open(req.GetEnvelope(), a.executor, openOptions{self: a.me.agentID}); err == nil &&
		o.header.GetMessageType() == synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE && !a.closed {
		a.closed = true
		close(a.complete)
	}
	return &synapsev1.SendResponse{}, nil
}

func checkAgent(r *report, rawURL string) {
	names := []string{"grpc-agent/serve", "grpc-agent/register", "grpc-agent/callbacks-signed", "grpc-agent/deregister"}
	skip := func(from int, why string) {
		for _, name := range names[from:] {
			r.fail(name, "not run: %s", why)
		}
	}
	conn, err := dial(rawURL)
	if err != nil {
		skip(0, err.Error())
		return
	}
	defer conn.Close()
	agent := &grpcAgent{me: newIdentity(), complete: make(chan struct{})}
	var endpoint string
	var stop func()
	if !r.check(names[0], func() error {
		caps := synapsev1.NewCapabilitiesServiceClient(conn)
		ctx, cancel := rpcContext(10 * time.Second)
		defer cancel()
		resp, err := caps.GetCapabilities(ctx, &synapsev1.GetCapabilitiesRequest{})
		if err != nil {
			return fmt.Errorf("GetCapabilities of the server: %v", err)
		}
		c := resp.GetCapabilities()
		agent.executor = peer{agentID: c.GetAgentId(), keyID: c.GetKeyId(), pub: c.GetPublicKey()}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		synapsev1.RegisterCapabilitiesServiceServer(srv, agent)
		synapsev1.RegisterP2PServiceServer(srv, agent)
		go func() { _ = srv.Serve(lis) }()
		stop = srv.Stop
		// No fragment: the server negotiates gRPC with this HTTP/2-only endpoint.
		endpoint = "http://" + lis.Addr().String()
		logf("gRPC-only agent %s at %s", agent.me.agentID, endpoint)
		return nil
	}) {
		skip(1, "no agent")
		return
	}
	defer stop()
	registry := synapsev1.NewRegistryServiceClient(conn)
	if !r.check(names[1], func() error { return agent.register(registry, endpoint) }) {
		skip(2, "not registered")
		return
	}
	r.check(names[2], func() error { return agent.requestWithCallback(synapsev1.NewP2PServiceClient(conn), endpoint) })
	r.check(names[3], func() error { return agent.deregister(registry) })
}

// register sends a signed registry:register; the registry calls the agent
// back (GetCapabilities, GetSupportedInterfaces) before it answers.
func (a *grpcAgent) register(registry synapsev1.RegistryServiceClient, endpoint string) error {
	env, _, err := a.me.seal(sealInput{
		messageType: synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_REGISTER,
		payload:     &synapsev1.AgentRegistrationPayload{Capabilities: a.capabilities(), Interfaces: a.interfaces(), EndpointUrl: endpoint, PublicKey: a.me.pub},
		receiver:    a.executor.agentID,
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
	if got.GetCapabilities().GetAgentId() != a.me.agentID || got.GetEndpointUrl() != endpoint {
		return fmt.Errorf("registered %q at %q", got.GetCapabilities().GetAgentId(), got.GetEndpointUrl())
	}
	if got.GetComplianceLevel() != synapsev1.Compliance_COMPLIANCE_BASIC {
		return fmt.Errorf("compliance level %v, want COMPLIANCE_BASIC", got.GetComplianceLevel())
	}
	return nil
}

// requestWithCallback asks the server for a text_analysis task with
// callback_url = this agent, waits for the pushed task_complete, and checks
// every pushed envelope: signed by the executor, addressed to us, fresh, in
// sequence order, ending with the right result.
func (a *grpcAgent) requestWithCallback(p2p synapsev1.P2PServiceClient, endpoint string) error {
	taskID := uuidV4()
	input, err := structpb.NewStruct(map[string]any{"text": taskText})
	if err != nil {
		return err
	}
	env, _, err := a.me.seal(sealInput{
		messageType: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST,
		payload:     &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "text_analysis", Payload: input}, CallbackUrl: endpoint},
		receiver:    a.executor.agentID,
		taskID:      taskID,
	})
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	if _, err := p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env}); err != nil {
		return fmt.Errorf("Send: %v", err)
	}
	select {
	case <-a.complete:
	case <-time.After(20 * time.Second):
		a.mu.Lock()
		n := len(a.pushed)
		a.mu.Unlock()
		return fmt.Errorf("no task_complete pushed within 20 s (%d envelopes pushed)", n)
	}
	a.mu.Lock()
	pushed := append([]*synapsev1.Envelope(nil), a.pushed...)
	a.mu.Unlock()
	now := time.Now()
	var last *opened
	for i, e := range pushed {
		o, err := open(e, a.executor, openOptions{self: a.me.agentID, now: &now})
		if err != nil {
			return fmt.Errorf("pushed envelope %d: %v", i+1, err)
		}
		if o.header.GetTaskId() != taskID {
			return fmt.Errorf("pushed envelope %d is about task %q", i+1, o.header.GetTaskId())
		}
		if o.header.GetSequence() != uint64(i+1) {
			return fmt.Errorf("pushed envelope %d has sequence %d", i+1, o.header.GetSequence())
		}
		last = o
	}
	if last == nil || last.header.GetMessageType() != synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
		return fmt.Errorf("the last of %d pushed envelopes is not task_complete", len(pushed))
	}
	logf("%d signed callbacks verified", len(pushed))
	return checkOutput(last.payload.(*synapsev1.TaskCompletePayload).GetResult())
}

func (a *grpcAgent) deregister(registry synapsev1.RegistryServiceClient) error {
	env, _, err := a.me.seal(sealInput{
		messageType: synapsev1.MessageType_MESSAGE_TYPE_REGISTRY_DEREGISTER,
		payload:     &synapsev1.AgentDeregistrationPayload{Reason: "interop run done"},
		receiver:    a.executor.agentID,
	})
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	if _, err := registry.Deregister(ctx, &synapsev1.DeregisterRequest{Envelope: env}); err != nil {
		return fmt.Errorf("Deregister: %v", err)
	}
	return nil
}
