package synapse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// serve starts a gRPC server on a loopback port and returns its base URL.
func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return "http://" + lis.Addr().String()
}

func connect(t *testing.T, url string, id *Identity) *Client {
	t.Helper()
	conn, err := Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, conn, id, ClientOptions{RetryBaseDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testAgent(t *testing.T) (*Agent, string) {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	agent := NewAgent(mustIdentity(t), AgentOptions{
		Name: "test agent",
		TaskTypes: []TaskType{
			{Type: "upper", Name: "Upper case", Handler: func(ctx context.Context, task *Task) (any, error) {
				if err := task.Progress(50, "half way"); err != nil {
					return nil, err
				}
				text := task.Input.GetFields()["text"].GetStringValue()
				return map[string]any{"text": strings.ToUpper(text), "requester": task.Requester.AgentID}, nil
			}},
			{Type: "fail", Handler: func(context.Context, *Task) (any, error) {
				return nil, &TaskError{Code: synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS, Message: "no"}
			}},
			{Type: "slow", Handler: func(ctx context.Context, task *Task) (any, error) {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-release:
					return "released", nil
				}
			}},
		},
	})
	return agent, serve(t, func(s *grpc.Server) { agent.Register(s) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAgentRunsATaskAndTheClientWatchesIt(t *testing.T) {
	agent, url := testAgent(t)
	ctx := ctxFor(t)
	c := connect(t, url, mustIdentity(t))
	if c.Executor.AgentID != agent.Identity().AgentID || c.Capabilities.GetSupportedTaskTypes()[2].GetType() != "upper" {
		t.Fatalf("capabilities %v", c.Capabilities)
	}
	sent, err := c.Submit(ctx, "upper", map[string]any{"text": "hello"}, SubmitOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Reply.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM || sent.Reply.Header.GetSequence() != 1 {
		t.Fatalf("reply %v", sent.Reply.Header)
	}
	if sent.Task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("state after waiting: %v", sent.Task.GetState())
	}
	out := sent.Task.GetResult().GetOutput().GetStructValue().GetFields()
	if out["text"].GetStringValue() != "HELLO" || out["requester"].GetStringValue() != c.Identity().AgentID {
		t.Fatalf("output %v", out)
	}

	var types []synapsev1.MessageType
	var snapshot *synapsev1.Task
	for item, err := range c.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Snapshot != nil {
			snapshot = item.Snapshot
		}
		if item.Event != nil {
			types = append(types, item.Event.Type())
		}
	}
	want := []synapsev1.MessageType{synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM, synapsev1.MessageType_MESSAGE_TYPE_TASK_STATUS_UPDATE, synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE}
	if snapshot == nil || len(types) != 3 || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Fatalf("snapshot %v, events %v", snapshot, types)
	}
	// Resuming from 3 gets only the last event.
	n := 0
	for item, err := range c.Watch(ctx, sent.TaskID, 3) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event != nil {
			n++
			if item.Event.Header.GetSequence() != 3 {
				t.Fatalf("resumed at %d", item.Event.Header.GetSequence())
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d events from sequence 3", n)
	}
	task, err := c.GetTask(ctx, sent.TaskID)
	if err != nil || task.GetLastSequence() != 3 || task.GetRequester().GetAgentId() != c.Identity().AgentID {
		t.Fatalf("GetTask: %v %v", task, err)
	}
	// Another requester cannot tell the task exists.
	stranger := connect(t, url, mustIdentity(t))
	if _, err := stranger.GetTask(ctx, sent.TaskID); status.Code(err) != codes.NotFound || ProtocolCode(err) != "task_not_found" {
		t.Fatalf("a stranger's GetTask: %v", err)
	}
	// ReadResult: no result streams here.
	if _, err := c.ReadResult(ctx, sent.TaskID, ReadResultOptions{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ReadResult: %v", err)
	}
	list, err := synapsev1.NewP2PServiceClient(mustDial(t, url)).ListTasks(mustBearer(t, ctx, c), &synapsev1.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 1 {
		t.Fatalf("ListTasks: %v %v", list, err)
	}
}

func mustDial(t *testing.T, url string) *grpc.ClientConn {
	conn, err := Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mustBearer(t *testing.T, ctx context.Context, c *Client) context.Context {
	token, err := c.Token(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return WithBearer(ctx, token)
}

func TestAgentRefusesAndRejects(t *testing.T) {
	_, url := testAgent(t)
	ctx := ctxFor(t)
	c := connect(t, url, mustIdentity(t))

	rejected, err := c.Submit(ctx, "nope", nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rejected.Reply.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_REJECT || rejected.Task.GetState() != synapsev1.TaskState_TASK_STATE_REJECTED ||
		rejected.Task.GetRejection().GetReason().GetCode() != synapsev1.ErrorCode_ERROR_CODE_CAPABILITY_LACKING {
		t.Fatalf("an unknown task type: %v / %v", rejected.Reply.Header, rejected.Task)
	}
	failed, err := c.Submit(ctx, "fail", nil, SubmitOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if failed.Task.GetState() != synapsev1.TaskState_TASK_STATE_FAILED || failed.Task.GetError().GetCode() != synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS {
		t.Fatalf("a failing handler: %v", failed.Task)
	}
	if _, err := c.Submit(ctx, "upper", nil, SubmitOptions{CallbackURL: "http://127.0.0.1:1"}); ProtocolCode(err) != "invalid_params" || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("callback_url: %v", err)
	}
	if _, err := c.Submit(ctx, "upper", nil, SubmitOptions{TaskID: failed.TaskID}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a used task id: %v", err)
	}

	// The same envelope again gets the same reply; another with its id is a replay.
	env, _, err := Seal(c.Identity(), Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, Receiver: c.Executor, TaskID: "t-replay",
		Payload: &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: "t-replay", Type: "upper"}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Send(ctx, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, env, 0)
	if err != nil || !bytes.Equal(again.Reply.Envelope.GetHeader(), first.Reply.Envelope.GetHeader()) || !proto.Equal(again.Reply.Envelope, first.Reply.Envelope) {
		t.Fatalf("the same envelope again: %v", err)
	}
	var h synapsev1.Header
	_ = proto.Unmarshal(env.GetHeader(), &h)
	other, _, _ := Seal(c.Identity(), Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, Receiver: c.Executor, TaskID: "t-replay",
		MessageID: h.GetMessageId(), Payload: &synapsev1.TaskCancelPayload{TaskId: "t-replay"}})
	if _, err := c.Send(ctx, other, 0); ProtocolCode(err) != "replay_detected" || status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a reused message id: %v", err)
	}
	// A tampered envelope is refused for its signature.
	tampered := proto.Clone(env).(*synapsev1.Envelope)
	tampered.Payload[len(tampered.Payload)-1] ^= 1
	if _, err := c.Send(ctx, tampered, 0); ProtocolCode(err) != "signature_invalid" || status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a tampered envelope: %v", err)
	}
	// Reads need a token for this agent.
	p2p := synapsev1.NewP2PServiceClient(mustDial(t, url))
	if _, err := p2p.GetTask(ctx, &synapsev1.GetTaskRequest{TaskId: "t-replay"}); ProtocolCode(err) != "unauthenticated" {
		t.Fatalf("GetTask without a token: %v", err)
	}
	wrong, _ := c.Identity().Token("agent_someone_else", time.Minute)
	if _, err := p2p.GetTask(WithBearer(ctx, wrong), &synapsev1.GetTaskRequest{TaskId: "t-replay"}); ProtocolCode(err) != "unauthenticated" {
		t.Fatalf("GetTask with a token for another agent: %v", err)
	}
}

func TestCancelEndsTheTaskAndItsHandler(t *testing.T) {
	_, url := testAgent(t)
	ctx := ctxFor(t)
	c := connect(t, url, mustIdentity(t))
	sent, err := c.Submit(ctx, "slow", nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Task.GetState() != synapsev1.TaskState_TASK_STATE_CONFIRMED {
		t.Fatalf("state %v", sent.Task.GetState())
	}
	cancelled, err := c.Cancel(ctx, sent.TaskID, "changed my mind")
	if err != nil {
		t.Fatal(err)
	}
	ack := cancelled.Reply.Payload.(*synapsev1.TaskAckPayload)
	if ack.GetState() != synapsev1.TaskState_TASK_STATE_CANCELLED || cancelled.Reply.Header.GetSequence() != 2 || !IsTerminalEvent(cancelled.Reply) {
		t.Fatalf("cancel reply %v", cancelled.Reply.Header)
	}
	if _, err := c.Cancel(ctx, sent.TaskID, "again"); ProtocolCode(err) != "task_already_completed" {
		t.Fatalf("a second cancel: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // the handler returns; nothing more is recorded
	task, err := c.GetTask(ctx, sent.TaskID)
	if err != nil || task.GetState() != synapsev1.TaskState_TASK_STATE_CANCELLED || task.GetLastSequence() != 2 {
		t.Fatalf("after cancel: %v %v", task, err)
	}
}

func TestExpectCallbacksTakesEventsInOrder(t *testing.T) {
	agent, url := testAgent(t)
	ctx := ctxFor(t)
	executor := mustIdentity(t)
	events := agent.ExpectCallbacks(executor.Ref(), "t-1")
	p2p := synapsev1.NewP2PServiceClient(mustDial(t, url))
	push := func(seq uint64, typ synapsev1.MessageType, payload proto.Message) (*synapsev1.SendResponse, error) {
		env, _, err := Seal(executor, Message{Type: typ, Payload: payload, Receiver: agent.Identity().Ref(), TaskID: "t-1", Sequence: seq})
		if err != nil {
			t.Fatal(err)
		}
		return p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env})
	}
	confirm := &synapsev1.TaskConfirmPayload{TaskId: "t-1", Confirmed: true}
	resp, err := push(1, synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM, confirm)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := Open(resp.GetReply().GetEnvelope(), OpenOptions{Trust: NewTrustStore(agent.Identity().Ref()), Self: executor.AgentID})
	if err != nil || ack.Type() != synapsev1.MessageType_MESSAGE_TYPE_ACK {
		t.Fatalf("the ack: %v", err)
	}
	if _, err := push(1, synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM, confirm); err != nil {
		t.Fatalf("an event received before is acknowledged again: %v", err)
	}
	if _, err := push(3, synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE, &synapsev1.TaskCompletePayload{TaskId: "t-1"}); ProtocolCode(err) != "illegal_transition" {
		t.Fatalf("a gap: %v", err)
	}
	if _, err := push(2, synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE, &synapsev1.TaskCompletePayload{TaskId: "t-1"}); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for o := range events {
		got = append(got, o.Header.GetSequence())
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("delivered %v", got)
	}
	stranger := mustIdentity(t)
	env, _, _ := Seal(stranger, Message{Type: synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE, Payload: &synapsev1.TaskCompletePayload{TaskId: "t-2"}, Receiver: agent.Identity().Ref(), TaskID: "t-2", Sequence: 1})
	if _, err := p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env}); status.Code(err) != codes.NotFound {
		t.Fatalf("an event for a task not requested: %v", err)
	}
}

// resultServer streams a fixed result, dropping the first stream after one chunk.
type resultServer struct {
	synapsev1.UnimplementedCapabilitiesServiceServer
	synapsev1.UnimplementedP2PServiceServer
	id      *Identity
	data    []byte
	dropped bool
	offsets []uint64
}

func (s *resultServer) GetCapabilities(context.Context, *synapsev1.GetCapabilitiesRequest) (*synapsev1.GetCapabilitiesResponse, error) {
	return &synapsev1.GetCapabilitiesResponse{Capabilities: &synapsev1.AgentCapabilities{AgentId: s.id.AgentID, KeyId: s.id.KeyID, PublicKey: s.id.PublicKey}}, nil
}

func (s *resultServer) ReadResult(req *synapsev1.ReadResultRequest, stream grpc.ServerStreamingServer[synapsev1.ReadResultResponse]) error {
	s.offsets = append(s.offsets, req.GetOffset())
	sum := sha256.Sum256(s.data)
	for off := req.GetOffset(); off < uint64(len(s.data)); off += 4 {
		end := min(off+4, uint64(len(s.data)))
		chunk := &synapsev1.StreamChunk{StreamId: req.GetTaskId(), Offset: off, Data: s.data[off:end], Last: end == uint64(len(s.data))}
		if chunk.Last {
			chunk.Sha256, chunk.TotalSize = sum[:], uint64(len(s.data))
		}
		if err := stream.Send(&synapsev1.ReadResultResponse{Chunk: chunk}); err != nil {
			return err
		}
		if !s.dropped {
			s.dropped = true
			return status.Error(codes.Unavailable, "dropped")
		}
	}
	return nil
}

func TestReadResultResumesAndChecksTheSignedDigest(t *testing.T) {
	srv := &resultServer{id: mustIdentity(t), data: []byte("0123456789abcdefghij")}
	url := serve(t, func(s *grpc.Server) {
		synapsev1.RegisterCapabilitiesServiceServer(s, srv)
		synapsev1.RegisterP2PServiceServer(s, srv)
	})
	ctx := ctxFor(t)
	c := connect(t, url, mustIdentity(t))
	sum := sha256.Sum256(srv.data)
	got, err := c.ReadResult(ctx, "t", ReadResultOptions{Expected: &synapsev1.ResultStream{TotalSize: 20, Sha256: sum[:]}})
	if err != nil || !bytes.Equal(got, srv.data) {
		t.Fatalf("read %q, %v", got, err)
	}
	if len(srv.offsets) != 2 || srv.offsets[0] != 0 || srv.offsets[1] != 4 {
		t.Fatalf("stream opened at offsets %v, want [0 4]", srv.offsets)
	}
	// Resuming from bytes already held returns the whole stream.
	got, err = c.ReadResult(ctx, "t", ReadResultOptions{Received: srv.data[:10]})
	if err != nil || !bytes.Equal(got, srv.data) {
		t.Fatalf("resumed read %q, %v", got, err)
	}
	// A digest other than the signed one is refused.
	bad := sha256.Sum256([]byte("something else"))
	_, err = c.ReadResult(ctx, "t", ReadResultOptions{Expected: &synapsev1.ResultStream{TotalSize: 20, Sha256: bad[:]}})
	var r *Refusal
	if !errors.As(err, &r) || r.ProtocolCode() != "signature_invalid" {
		t.Fatalf("a wrong digest: %v", err)
	}
}

func TestATaskPastItsTimeoutFails(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	agent := NewAgent(mustIdentity(t), AgentOptions{TaskTimeout: 100 * time.Millisecond, TaskTypes: []TaskType{
		{Type: "stuck", Handler: func(context.Context, *Task) (any, error) { <-release; return "late", nil }},
	}})
	url := serve(t, func(s *grpc.Server) { agent.Register(s) })
	c := connect(t, url, mustIdentity(t))
	sent, err := c.Submit(ctxFor(t), "stuck", nil, SubmitOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Task.GetState() != synapsev1.TaskState_TASK_STATE_FAILED || sent.Task.GetError().GetCode() != synapsev1.ErrorCode_ERROR_CODE_EXECUTION_TIMEOUT || !sent.Task.GetError().GetRecoverable() {
		t.Fatalf("a handler past its timeout: %v", sent.Task)
	}
}
