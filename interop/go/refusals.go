// Checks (d) and (e): a tampered envelope is refused with UNAUTHENTICATED
// and a synapse.v1.ErrorDetail (protocol_code "signature_invalid") in
// grpc-status-details-bin; GetTask answers with our own bearer token and
// refuses a token addressed to another agent.
package main

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

// (d) a valid task_request with one payload bit flipped after signing.
func (s *session) tampered() error {
	env, _, err := s.taskRequest(uuidV4())
	if err != nil {
		return err
	}
	env.Payload[len(env.Payload)-1] ^= 0x01
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	_, err = s.p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env})
	return expectRefusal(err, codes.Unauthenticated, "signature_invalid")
}

// expectRefusal: err is a gRPC status with code and, if protocolCode is
// set, a synapse.v1.ErrorDetail in grpc-status-details-bin carrying it.
func expectRefusal(err error, code codes.Code, protocolCode string) error {
	if err == nil {
		return fmt.Errorf("accepted, want %v", code)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("not a gRPC status: %v", err)
	}
	logf("refused: %v %q details %v", st.Code(), st.Message(), st.Details())
	if st.Code() != code {
		return fmt.Errorf("status %v (%s), want %v", st.Code(), st.Message(), code)
	}
	if protocolCode == "" {
		return nil
	}
	var found []string
	for _, d := range st.Details() {
		if ed, ok := d.(*synapsev1.ErrorDetail); ok {
			if ed.GetProtocolCode() == protocolCode {
				return nil
			}
			found = append(found, ed.GetProtocolCode())
		} else {
			found = append(found, fmt.Sprintf("%T %v", d, d))
		}
	}
	return fmt.Errorf("status %v (%s) without a synapse.v1.ErrorDetail with protocol_code %q; details: %v", st.Code(), st.Message(), protocolCode, found)
}

// (e) GetTask with a bearer token we made.
func (s *session) getTask() error {
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	ctx = withBearer(ctx, s.me.token(s.executor.agentID, 120*time.Second))
	resp, err := s.p2p.GetTask(ctx, &synapsev1.GetTaskRequest{TaskId: s.taskID})
	if err != nil {
		return fmt.Errorf("GetTask: %v", err)
	}
	task := resp.GetTask()
	if task.GetTaskId() != s.taskID || task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		return fmt.Errorf("task %q in %v, want %q in TASK_STATE_COMPLETED", task.GetTaskId(), task.GetState(), s.taskID)
	}
	if task.GetRequester().GetAgentId() != s.me.agentID {
		return fmt.Errorf("task requester %q, want %q", task.GetRequester().GetAgentId(), s.me.agentID)
	}
	return checkOutput(task.GetResult())
}

// (e) the same call with a token addressed to another agent: UNAUTHENTICATED
// with ErrorDetail protocol_code "unauthenticated" (ERROR_CODE_UNAUTHENTICATED
// is the bearer-token refusal in errors.proto).
func (s *session) wrongAudience() error {
	ctx, cancel := rpcContext(10 * time.Second)
	defer cancel()
	ctx = withBearer(ctx, s.me.token("someone_else", 120*time.Second))
	_, err := s.p2p.GetTask(ctx, &synapsev1.GetTaskRequest{TaskId: s.taskID})
	return expectRefusal(err, codes.Unauthenticated, "unauthenticated")
}
