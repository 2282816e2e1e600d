package synapse

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

func confidentialAgent(t *testing.T) (*Agent, string) {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	upper := func(ctx context.Context, task *Task) (any, error) {
		if err := task.Progress(50, "half way through "+task.Input.GetFields()["text"].GetStringValue()); err != nil {
			return nil, err
		}
		return map[string]any{"text": strings.ToUpper(task.Input.GetFields()["text"].GetStringValue()), "confidential": task.Confidential}, nil
	}
	agent := NewAgent(mustIdentity(t), AgentOptions{TaskTypes: []TaskType{
		{Type: "upper", Handler: upper},
		{Type: "secret", Handler: upper, RequiresConfidentiality: true},
		{Type: "slow", Handler: func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return "released", nil
			}
		}},
	}})
	return agent, serve(t, func(s *grpc.Server) { agent.Register(s) })
}

func connectKeyed(t *testing.T, url string, id *Identity, enc *EncryptionKey) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, mustDial(t, url), id, ClientOptions{RetryBaseDelay: 10 * time.Millisecond, EncryptionKey: enc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfidentialTaskOverLoopback(t *testing.T) {
	agent, url := confidentialAgent(t)
	ctx := ctxFor(t)
	me := mustIdentity(t)
	myKey, err := NewEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	c := connectKeyed(t, url, me, myKey)
	caps := c.Capabilities
	if len(caps.GetEncryptionKeys()) != 1 {
		t.Fatalf("the agent publishes %d encryption keys", len(caps.GetEncryptionKeys()))
	}
	if b, err := CurrentEncryptionKey(caps.GetEncryptionKeys(), agent.Identity().AgentID, agent.Identity().PublicKey); err != nil || b.GetKeyId() != agent.EncryptionKeys()[0].KeyID {
		t.Fatalf("published binding: %v", err)
	}
	for _, tt := range caps.GetSupportedTaskTypes() {
		if tt.GetRequiresConfidentiality() != (tt.GetType() == "secret") {
			t.Fatalf("task type %s declares requires_confidentiality %v", tt.GetType(), tt.GetRequiresConfidentiality())
		}
	}

	sent, err := c.Submit(ctx, "secret", map[string]any{"text": "the merger closes friday"}, SubmitOptions{Confidential: true, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Reply.Confidential() || sent.Reply.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM {
		t.Fatalf("the reply is not a sealed task_confirm: %v", sent.Reply.Header)
	}
	task := sent.Task
	if task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED || task.GetConfidential() == nil {
		t.Fatalf("task %v", task)
	}
	if task.GetResult() != nil || task.GetRequest() != nil || task.GetStatusMessage() != "" {
		t.Fatalf("a confidential task shows its content: %v", task)
	}
	// The wire carries nothing of the content; every event opens and is the next.
	var complete *Opened
	var seen []synapsev1.MessageType
	for item, err := range c.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event == nil {
			continue
		}
		ev := item.Event
		if !ev.Confidential() || len(ev.Envelope.GetSignature().GetValue()) != 0 {
			t.Fatalf("event %v is not sealed", ev.Type())
		}
		if bytes.Contains(ev.Envelope.GetPayload(), []byte("MERGER")) || bytes.Contains(ev.Envelope.GetPayload(), []byte("merger")) {
			t.Fatal("an event's ciphertext shows the content")
		}
		seen = append(seen, ev.Type())
		if ev.Type() == synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
			complete = ev
		}
	}
	if len(seen) != 3 || complete == nil {
		t.Fatalf("events %v", seen)
	}
	out := complete.Payload.(*synapsev1.TaskCompletePayload).GetResult().GetOutput().GetStructValue().GetFields()
	if out["text"].GetStringValue() != "THE MERGER CLOSES FRIDAY" || !out["confidential"].GetBoolValue() {
		t.Fatalf("output %v", out)
	}

	// Another process with the requester's identity and encryption key
	// learns the task key from GetTask and reads the events.
	later := connectKeyed(t, url, me, myKey)
	if later.TaskKey(sent.TaskID) != nil {
		t.Fatal("a new client already holds the key")
	}
	got, err := later.GetTask(ctx, sent.TaskID)
	if err != nil || got.GetConfidential() == nil || !bytes.Equal(later.TaskKey(sent.TaskID), c.TaskKey(sent.TaskID)) {
		t.Fatalf("GetTask did not give the task key: %v", err)
	}
	n := 0
	for item, err := range later.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event != nil {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the later client read %d events", n)
	}
	// With another encryption key the task key does not unwrap.
	otherKey, _ := NewEncryptionKey()
	stranger := connectKeyed(t, url, me, otherKey)
	if _, err := stranger.GetTask(ctx, sent.TaskID); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("GetTask with another encryption key: %v", err)
	}

	// A task type that requires confidentiality refuses a plaintext request.
	if _, err := c.Submit(ctx, "secret", map[string]any{"text": "x"}, SubmitOptions{}); ProtocolCode(err) != "confidentiality_required" {
		t.Fatalf("plaintext request for a confidential type: %v", err)
	}
	// Plaintext tasks of other types still run in the clear.
	plain, err := c.Submit(ctx, "upper", map[string]any{"text": "x"}, SubmitOptions{Wait: 10 * time.Second})
	if err != nil || plain.Reply.Confidential() || plain.Task.GetResult() == nil {
		t.Fatalf("plaintext task: %v", err)
	}
	// A confidential message on a plaintext task has no key to open with.
	if _, err := c.Send(ctx, sealedWith(t, me, agent, plain.TaskID, NewTaskKey()), 0); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("sealed cancel of a plaintext task: %v", err)
	}
}

// sealedWith is a task_cancel sealed with key.
func sealedWith(t *testing.T, me *Identity, agent *Agent, taskID string, key []byte) *synapsev1.Envelope {
	t.Helper()
	env, _, err := SealConfidential(me, Message{
		Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.TaskCancelPayload{TaskId: taskID, Reason: "stop"},
		Receiver: agent.Identity().Ref(), TaskID: taskID,
	}, Sealing{TaskKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestConfidentialFollowUpsAndRefusals(t *testing.T) {
	agent, url := confidentialAgent(t)
	ctx := ctxFor(t)
	me := mustIdentity(t)
	c := connect(t, url, me)
	sent, err := c.Submit(ctx, "slow", nil, SubmitOptions{Confidential: true})
	if err != nil {
		t.Fatal(err)
	}
	// A plaintext cancel of a confidential task is refused.
	env, _, err := Seal(me, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Payload: &synapsev1.TaskCancelPayload{TaskId: sent.TaskID}, Receiver: agent.Identity().Ref(), TaskID: sent.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, env, 0); ProtocolCode(err) != "confidentiality_required" || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("plaintext cancel: %v", err)
	}
	// One sealed with another task key is refused.
	if _, err := c.Send(ctx, sealedWith(t, me, agent, sent.TaskID, NewTaskKey()), 0); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("cancel under another task key: %v", err)
	}
	// A damaged ciphertext, or a header changed after sealing, does not open.
	damaged := sealedWith(t, me, agent, sent.TaskID, c.TaskKey(sent.TaskID))
	damaged.Payload[len(damaged.Payload)-1] ^= 1
	if _, err := c.Send(ctx, damaged, 0); ProtocolCode(err) != "decryption_failed" || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("damaged ciphertext: %v", err)
	}
	changed := sealedWith(t, me, agent, sent.TaskID, c.TaskKey(sent.TaskID))
	h := &synapsev1.Header{}
	if err := proto.Unmarshal(changed.GetHeader(), h); err != nil {
		t.Fatal(err)
	}
	h.CorrelationId = "changed"
	if changed.Header, err = proto.Marshal(h); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, changed, 0); ProtocolCode(err) != "decryption_failed" {
		t.Fatalf("changed header: %v", err)
	}
	// A request sealed to a key the agent does not hold.
	stranger, _ := NewEncryptionKey()
	b, _ := SignEncryptionKey(agent.Identity(), stranger)
	notTheAgents, _ := VerifyEncryptionKey(b, agent.Identity().AgentID, agent.Identity().PublicKey)
	key, id := NewTaskKey(), NewUUID()
	w, err := WrapTaskKey(key, id, &synapsev1.AgentRef{AgentId: me.AgentID, KeyId: me.KeyID}, notTheAgents)
	if err != nil {
		t.Fatal(err)
	}
	req, _, err := SealConfidential(me, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, Payload: &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: id, Type: "slow"}},
		Receiver: agent.Identity().Ref(), TaskID: id}, Sealing{TaskKey: key, Keys: []*synapsev1.WrappedKey{w}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, req, 0); ProtocolCode(err) != "encryption_key_unknown" {
		t.Fatalf("request wrapped to another key: %v", err)
	}
	// The sealed cancel ends it, and its task_ack is sealed.
	res, err := c.Cancel(ctx, sent.TaskID, "no longer needed")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reply.Confidential() || res.Reply.Payload.(*synapsev1.TaskAckPayload).GetState() != synapsev1.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("cancel reply %v", res.Reply.Header)
	}
}

// clearEvents is an executor that streams a confidential task's event in the clear.
type clearEvents struct {
	synapsev1.UnimplementedCapabilitiesServiceServer
	synapsev1.UnimplementedP2PServiceServer
	id        *Identity
	requester Peer
}

func (s *clearEvents) GetCapabilities(context.Context, *synapsev1.GetCapabilitiesRequest) (*synapsev1.GetCapabilitiesResponse, error) {
	return &synapsev1.GetCapabilitiesResponse{Capabilities: &synapsev1.AgentCapabilities{AgentId: s.id.AgentID, KeyId: s.id.KeyID, PublicKey: s.id.PublicKey}}, nil
}

func (s *clearEvents) Watch(req *synapsev1.WatchRequest, stream grpc.ServerStreamingServer[synapsev1.WatchResponse]) error {
	env, _, err := Seal(s.id, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM, Payload: &synapsev1.TaskConfirmPayload{TaskId: req.GetTaskId(), Confirmed: true},
		Receiver: s.requester, TaskID: req.GetTaskId(), Sequence: 1})
	if err != nil {
		return err
	}
	return stream.Send(&synapsev1.WatchResponse{Kind: &synapsev1.WatchResponse_Event{Event: &synapsev1.TaskEvent{Sequence: 1, Message: &synapsev1.SignedMessage{Envelope: env}}}})
}

func TestClientRefusesEventsInTheClearOnAConfidentialTask(t *testing.T) {
	me := mustIdentity(t)
	srv := &clearEvents{id: mustIdentity(t), requester: me.Ref()}
	url := serve(t, func(s *grpc.Server) {
		synapsev1.RegisterCapabilitiesServiceServer(s, srv)
		synapsev1.RegisterP2PServiceServer(s, srv)
	})
	c := connect(t, url, me)
	c.setTaskKey("t", NewTaskKey())
	for _, err := range c.Watch(ctxFor(t), "t", 1) {
		if ProtocolCode(err) == "confidentiality_required" {
			return
		}
		t.Fatalf("watch of a confidential task took an event in the clear: %v", err)
	}
	t.Fatal("the watch ended without refusing the event")
}
