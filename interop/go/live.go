// The live checks against a running server over gRPC, through the kit's
// Client: (b) GetCapabilities and a signed task_request with wait; (c) a
// watch whose every event is verified; (d) a tampered envelope refused with
// its ErrorDetail; (e) GetTask with the kit's bearer token, and a token for
// another agent refused; (f) a result stream read with ReadResult and
// checked against the signed task_complete. A check whose prerequisite
// failed is reported as FAIL.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	synapse "github.com/synapse-connect/synapse-go"
	"github.com/synapse-connect/synapse-go/synapsev1"
)

const taskText = "The Go client speaks Synapse. It signs every byte."

// session is what the live checks share.
type session struct {
	conn   *grpc.ClientConn
	client *synapse.Client
	taskID string
	result *synapsev1.TaskResult // from Send, compared with Watch
}

func checkLive(r *report, url string) {
	names := []string{"grpc/capabilities", "grpc/send-task-request", "grpc/watch", "grpc/tampered-envelope-refused",
		"grpc/get-task-bearer", "grpc/get-task-wrong-audience-refused", "grpc/read-result-stream"}
	conn, err := synapse.Dial(url)
	if err != nil {
		r.skip(names, err.Error())
		return
	}
	defer conn.Close()
	s := &session{conn: conn}
	if !r.check(names[0], s.capabilities) {
		r.skip(names[1:], "no executor identity")
		return
	}
	if !r.check(names[1], s.sendTask) {
		r.skip(names[2:3], "no task")
	} else {
		r.check(names[2], s.watch)
	}
	r.check(names[3], s.tampered)
	if s.taskID == "" {
		r.skip(names[4:6], "no task")
	} else {
		r.check(names[4], s.getTask)
		r.check(names[5], s.wrongAudience)
	}
	r.check(names[6], s.readResult)
}

// (b) the executor's identity, its key id checked against its key.
func (s *session) capabilities() error {
	me, err := synapse.NewIdentity()
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	if s.client, err = synapse.NewClient(ctx, s.conn, me, synapse.ClientOptions{}); err != nil {
		return err
	}
	logf("executor %s key %s", s.client.Executor.AgentID, s.client.Executor.KeyID)
	for _, t := range s.client.Capabilities.GetSupportedTaskTypes() {
		if t.GetType() == "text_analysis" {
			return nil
		}
	}
	return fmt.Errorf("text_analysis is not offered")
}

// checkOutput: the text_analysis result has 9 words and 2 sentences.
func checkOutput(result *synapsev1.TaskResult) error {
	out := result.GetOutput().GetStructValue().GetFields()
	if out["words"].GetNumberValue() != 9 || out["sentences"].GetNumberValue() != 2 {
		return fmt.Errorf("result output words=%v sentences=%v, want 9 and 2", out["words"], out["sentences"])
	}
	return nil
}

// (b) a signed task_request, waiting for the outcome; the reply is verified by the kit.
func (s *session) sendTask() error {
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	sent, err := s.client.Submit(ctx, "text_analysis", map[string]any{"text": taskText}, synapse.SubmitOptions{Wait: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("Send: %v", err)
	}
	if sent.Reply == nil || sent.Reply.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM {
		return fmt.Errorf("reply is %v, want MESSAGE_TYPE_TASK_CONFIRM", sent.Reply)
	}
	if confirm := sent.Reply.Payload.(*synapsev1.TaskConfirmPayload); confirm.GetTaskId() != sent.TaskID || !confirm.GetConfirmed() || sent.Reply.Header.GetTaskId() != sent.TaskID {
		return fmt.Errorf("confirm %v for task %s", confirm, sent.TaskID)
	}
	if sent.Task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		return fmt.Errorf("task state %v, want TASK_STATE_COMPLETED", sent.Task.GetState())
	}
	if err := checkOutput(sent.Task.GetResult()); err != nil {
		return err
	}
	s.taskID, s.result = sent.TaskID, sent.Task.GetResult()
	return nil
}

// (c) every event verified by the kit, in order, ending with task_complete.
func (s *session) watch() error {
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	var last *synapse.Opened
	sawSnapshot, events := false, 0
	for item, err := range s.client.Watch(ctx, s.taskID, 1) {
		if err != nil {
			return fmt.Errorf("after %d events: %v", events, err)
		}
		switch {
		case item.Snapshot != nil:
			sawSnapshot = item.Snapshot.GetTaskId() == s.taskID && events == 0
		case item.Event != nil:
			events++
			last = item.Event
			logf("event %d %v", item.Event.Header.GetSequence(), item.Event.Type())
		}
	}
	if !sawSnapshot || last == nil {
		return fmt.Errorf("snapshot first: %v; %d events", sawSnapshot, events)
	}
	if last.Type() != synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
		return fmt.Errorf("the last event (%d) is %v", events, last.Type())
	}
	result := last.Payload.(*synapsev1.TaskCompletePayload).GetResult()
	if !proto.Equal(result.GetOutput(), s.result.GetOutput()) {
		return fmt.Errorf("task_complete output %v differs from Send's %v", result.GetOutput(), s.result.GetOutput())
	}
	return checkOutput(result)
}

// expectRefusal: err is a gRPC status with code and a synapse.v1.ErrorDetail carrying protocolCode.
func expectRefusal(err error, code codes.Code, protocolCode string) error {
	if err == nil {
		return fmt.Errorf("accepted, want %v", code)
	}
	if status.Code(err) != code || synapse.ProtocolCode(err) != protocolCode {
		return fmt.Errorf("refused with %v (protocol code %q), want %v / %s", err, synapse.ProtocolCode(err), code, protocolCode)
	}
	return nil
}

// (d) a valid task_request with one payload bit flipped after signing.
func (s *session) tampered() error {
	taskID := synapse.NewUUID()
	env, _, err := s.client.Seal(synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST,
		&synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "text_analysis"}}, taskID)
	if err != nil {
		return err
	}
	env.Payload[len(env.Payload)-1] ^= 0x01
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	_, err = s.client.Send(ctx, env, 0)
	return expectRefusal(err, codes.Unauthenticated, "signature_invalid")
}

// (e) GetTask with the kit's bearer token.
func (s *session) getTask() error {
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	task, err := s.client.GetTask(ctx, s.taskID)
	if err != nil {
		return err
	}
	if task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED || task.GetRequester().GetAgentId() != s.client.Identity().AgentID {
		return fmt.Errorf("task in %v requested by %q", task.GetState(), task.GetRequester().GetAgentId())
	}
	return checkOutput(task.GetResult())
}

// (e) a token addressed to another agent: UNAUTHENTICATED / unauthenticated.
func (s *session) wrongAudience() error {
	token, err := s.client.Identity().Token("someone_else", 2*time.Minute)
	if err != nil {
		return err
	}
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	_, err = synapsev1.NewP2PServiceClient(s.conn).GetTask(synapse.WithBearer(ctx, token), &synapsev1.GetTaskRequest{TaskId: s.taskID})
	return expectRefusal(err, codes.Unauthenticated, "unauthenticated")
}

// (f) data_analysis with include_rows offers its rows as a result stream:
// read it with ReadResult, checked against the signed task_complete.
func (s *session) readResult() error {
	var csv strings.Builder
	csv.WriteString("n,square\n")
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&csv, "%d,%d\n", i, i*i)
	}
	ctx, cancel := rpcContext(60 * time.Second)
	defer cancel()
	sent, err := s.client.Submit(ctx, "data_analysis", map[string]any{"csv": csv.String(), "include_rows": true}, synapse.SubmitOptions{Wait: 30 * time.Second})
	if err != nil {
		return err
	}
	var complete *synapsev1.TaskCompletePayload
	for item, err := range s.client.Watch(ctx, sent.TaskID, 1) {
		if err != nil {
			return err
		}
		if item.Event != nil && item.Event.Type() == synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
			complete = item.Event.Payload.(*synapsev1.TaskCompletePayload)
		}
	}
	stream := complete.GetResult().GetStream()
	if stream.GetTotalSize() == 0 {
		return fmt.Errorf("the signed task_complete offers no result stream: %v", complete.GetResult())
	}
	data, err := s.client.ReadResult(ctx, sent.TaskID, synapse.ReadResultOptions{Expected: stream})
	if err != nil {
		return err
	}
	// Resumed after the first 100 bytes, the same stream again.
	again, err := s.client.ReadResult(ctx, sent.TaskID, synapse.ReadResultOptions{Expected: stream, Received: data[:100]})
	if err != nil || !bytes.Equal(again, data) {
		return fmt.Errorf("resumed read: %v", err)
	}
	var doc struct {
		Rows       int              `json:"rows"`
		ParsedRows []map[string]any `json:"parsed_rows"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("the stream is not the JSON document: %v", err)
	}
	rows := doc.ParsedRows
	if doc.Rows != 200 || len(rows) != 200 || fmt.Sprint(rows[199]["square"]) != "40000" {
		return fmt.Errorf("%d rows (%d parsed), the last %v", doc.Rows, len(rows), rows[len(rows)-1])
	}
	logf("result stream: %d bytes, %d rows", len(data), len(rows))
	return nil
}
