// Check (c): Watch a task's signed event log with a bearer token. Every
// event is verified with the executor's key (authenticity, not freshness:
// events are records), sequences run 1, 2, 3, ... without gaps and equal the
// signed header's sequence, and the last event is task_complete with the
// result that Send returned.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	synapsev1 "synapse-interop/gen/synapse/v1"
)

// (c) every event of the task, verified, in order, ending with task_complete.
func (s *session) watch() error {
	ctx, cancel := rpcContext(30 * time.Second)
	defer cancel()
	ctx = withBearer(ctx, s.me.token(s.executor.agentID, 120*time.Second))
	stream, err := s.p2p.Watch(ctx, &synapsev1.WatchRequest{TaskId: s.taskID, FromSequence: 1})
	if err != nil {
		return fmt.Errorf("Watch: %v", err)
	}
	var last *opened
	next := uint64(1)
	sawSnapshot := false
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("Watch stream after %d events: %v", next-1, err)
		}
		switch kind := msg.GetKind().(type) {
		case *synapsev1.WatchResponse_Snapshot:
			if sawSnapshot || next != 1 {
				return fmt.Errorf("a snapshot arrived after the first message")
			}
			sawSnapshot = true
			if kind.Snapshot.GetTaskId() != s.taskID {
				return fmt.Errorf("snapshot of task %q, want %q", kind.Snapshot.GetTaskId(), s.taskID)
			}
		case *synapsev1.WatchResponse_Heartbeat:
			now := time.Now()
			if _, err := open(kind.Heartbeat.GetEnvelope(), s.executor, openOptions{self: s.me.agentID, now: &now}); err != nil {
				return fmt.Errorf("heartbeat: %v", err)
			}
		case *synapsev1.WatchResponse_Event:
			ev := kind.Event
			if ev.GetSequence() != next {
				return fmt.Errorf("event sequence %d where %d was due", ev.GetSequence(), next)
			}
			// A log read back is checked for authenticity, not freshness.
			o, err := open(ev.GetMessage().GetEnvelope(), s.executor, openOptions{self: s.me.agentID})
			if err != nil {
				return fmt.Errorf("event %d: %v", next, err)
			}
			if o.header.GetSequence() != ev.GetSequence() {
				return fmt.Errorf("event %d is signed as sequence %d", ev.GetSequence(), o.header.GetSequence())
			}
			if o.header.GetTaskId() != s.taskID {
				return fmt.Errorf("event %d is about task %q", next, o.header.GetTaskId())
			}
			logf("event %d %v", ev.GetSequence(), o.header.GetMessageType())
			last = o
			next++
		default:
			return fmt.Errorf("unexpected watch message %T", kind)
		}
	}
	if !sawSnapshot {
		return fmt.Errorf("no snapshot first")
	}
	if last == nil {
		return fmt.Errorf("no events")
	}
	if t := last.header.GetMessageType(); t != synapsev1.MessageType_MESSAGE_TYPE_TASK_COMPLETE {
		return fmt.Errorf("last event (%d) is %v, want MESSAGE_TYPE_TASK_COMPLETE", next-1, t)
	}
	complete := last.payload.(*synapsev1.TaskCompletePayload)
	if err := checkOutput(complete.GetResult()); err != nil {
		return fmt.Errorf("task_complete: %v", err)
	}
	if !bytes.Equal(mustJSON(complete.GetResult().GetOutput()), mustJSON(s.result.GetOutput())) {
		return fmt.Errorf("task_complete output %v differs from Send's %v", complete.GetResult().GetOutput(), s.result.GetOutput())
	}
	return nil
}

func mustJSON(v interface{ MarshalJSON() ([]byte, error) }) []byte {
	b, err := v.MarshalJSON()
	if err != nil {
		return []byte(err.Error())
	}
	return b
}
