// The live checks against a running server over gRPC (HTTP/2 cleartext,
// or TLS for https URLs), in order: (b) GetCapabilities, then a signed
// task_request through Send with wait; (c) in watch.go; (d) and (e) in
// refusals.go. A check whose prerequisite failed is reported as FAIL.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

const taskText = "The Go client speaks Synapse. It signs every byte."

// session is what the live checks share.
type session struct {
	me       identity
	executor peer
	caps     synapsev1.CapabilitiesServiceClient
	p2p      synapsev1.P2PServiceClient
	taskID   string
	result   *synapsev1.TaskResult // from Send (b), compared with Watch (c)
}

func dial(raw string) (*grpc.ClientConn, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bad URL %q", raw)
	}
	creds := insecure.NewCredentials()
	switch u.Scheme {
	case "http":
	case "https":
		creds = credentials.NewTLS(&tls.Config{})
	default:
		return nil, fmt.Errorf("URL scheme %q: want http or https", u.Scheme)
	}
	return grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
}

func checkLive(r *report, rawURL string) {
	live := []string{"grpc/capabilities", "grpc/send-task-request", "grpc/watch", "grpc/tampered-envelope-refused", "grpc/get-task-bearer", "grpc/get-task-wrong-audience-refused"}
	skipAll := func(from int, why string) {
		for _, name := range live[from:] {
			r.fail(name, "not run: %s", why)
		}
	}
	conn, err := dial(rawURL)
	if err != nil {
		skipAll(0, err.Error())
		return
	}
	defer conn.Close()
	s := &session{
		me:   newIdentity(),
		caps: synapsev1.NewCapabilitiesServiceClient(conn),
		p2p:  synapsev1.NewP2PServiceClient(conn),
	}
	if !r.check(live[0], s.capabilities) {
		skipAll(1, "no executor identity")
		return
	}
	if !r.check(live[1], s.sendTask) {
		skipAll(2, "no task")
		return
	}
	r.check(live[2], s.watch)
	r.check(live[3], s.tampered)
	r.check(live[4], s.getTask)
	r.check(live[5], s.wrongAudience)
}

func rpcContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// (b) learn the executor's identity.
func (s *session) capabilities() error {
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	resp, err := s.caps.GetCapabilities(ctx, &synapsev1.GetCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("GetCapabilities: %v", err)
	}
	c := resp.GetCapabilities()
	if c.GetAgentId() == "" {
		return fmt.Errorf("no agent_id in %v", c)
	}
	if len(c.GetPublicKey()) != 32 {
		return fmt.Errorf("public_key is %d bytes, want 32", len(c.GetPublicKey()))
	}
	if id := keyID(c.GetPublicKey()); id != c.GetKeyId() {
		return fmt.Errorf("key_id %q is not the thumbprint of public_key (%q)", c.GetKeyId(), id)
	}
	logf("executor %s key %s", c.GetAgentId(), c.GetKeyId())
	s.executor = peer{agentID: c.GetAgentId(), keyID: c.GetKeyId(), pub: c.GetPublicKey()}
	return nil
}

func (s *session) taskRequest(taskID string) (*synapsev1.Envelope, *synapsev1.Header, error) {
	input, err := structpb.NewStruct(map[string]any{"text": taskText})
	if err != nil {
		return nil, nil, err
	}
	return s.me.seal(sealInput{
		messageType: synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST,
		payload:     &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "text_analysis", Payload: input}},
		receiver:    s.executor.agentID,
		taskID:      taskID,
	})
}

// checkOutput: the text_analysis result has 9 words and 2 sentences.
func checkOutput(result *synapsev1.TaskResult) error {
	out := result.GetOutput().GetStructValue()
	if out == nil {
		return fmt.Errorf("result output is not an object: %v", result.GetOutput())
	}
	words, sentences := out.GetFields()["words"], out.GetFields()["sentences"]
	if words.GetNumberValue() != 9 || sentences.GetNumberValue() != 2 {
		return fmt.Errorf("result output words=%v sentences=%v, want 9 and 2", words, sentences)
	}
	return nil
}

// (b) a signed task_request, waiting for the outcome.
func (s *session) sendTask() error {
	s.taskID = uuidV4()
	env, sent, err := s.taskRequest(s.taskID)
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	resp, err := s.p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env, Wait: durationpb.New(10 * time.Second)})
	if err != nil {
		return fmt.Errorf("Send: %v", err)
	}
	now := time.Now()
	reply, err := open(resp.GetReply().GetEnvelope(), s.executor, openOptions{self: s.me.agentID, now: &now})
	if err != nil {
		return fmt.Errorf("reply envelope: %v", err)
	}
	if t := reply.header.GetMessageType(); t != synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM {
		return fmt.Errorf("reply is %v, want MESSAGE_TYPE_TASK_CONFIRM", t)
	}
	if reply.header.GetTaskId() != s.taskID {
		return fmt.Errorf("reply task_id %q, want %q", reply.header.GetTaskId(), s.taskID)
	}
	if rt := reply.header.GetReplyTo(); rt != "" && rt != sent.GetMessageId() {
		return fmt.Errorf("reply_to %q, want our message id %q", rt, sent.GetMessageId())
	}
	if confirm := reply.payload.(*synapsev1.TaskConfirmPayload); confirm.GetTaskId() != s.taskID || !confirm.GetConfirmed() {
		return fmt.Errorf("confirm payload %v", confirm)
	}
	task := resp.GetTask()
	logf("reply %v: %v; task %v result %v", reply.header.GetMessageType(), reply.header, task.GetState(), task.GetResult().GetOutput())
	if task.GetTaskId() != s.taskID {
		return fmt.Errorf("task id %q, want %q", task.GetTaskId(), s.taskID)
	}
	if task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		return fmt.Errorf("task state %v, want TASK_STATE_COMPLETED", task.GetState())
	}
	if err := checkOutput(task.GetResult()); err != nil {
		return err
	}
	s.result = task.GetResult()
	return nil
}
