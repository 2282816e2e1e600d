// Watch fan-out: one requester's task waits for a human decision; W Watch
// streams (P2PService.Watch, gRPC server streams spread over C HTTP/2
// connections) follow it from its next event; then the requester cancels
// it with a signed task_cancel (Send, no wait) on a connection of its own.
// Reported: how long the streams took to open (each has its snapshot), how
// long the cancelling Send took, and when the event (the task_ack that ends
// the task) reached every stream, counted from just before that Send.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	synapsev1 "synapse-peer-loadgen/gen/synapse/v1"
)

type watchResult struct {
	Mode        string  `json:"mode"`
	Watchers    int     `json:"watchers"`
	Connections int     `json:"connections"`
	Opened      int     `json:"opened"`
	OpenMs      float64 `json:"open_ms"`
	SendMs      float64 `json:"send_ms"`
	Received    int     `json:"received"`
	FanoutMs    float64 `json:"fanout_ms"`
	FanoutP50Ms float64 `json:"fanout_p50_ms"`
	Heartbeats  int64   `json:"heartbeats"`
	// The server's CPU time while the streams opened, and from the event's Send until every stream had it (-pid).
	OpenCPUMs   *float64 `json:"open_cpu_ms"`
	FanoutCPUMs *float64 `json:"fanout_cpu_ms"`
	Errors      int64    `json:"errors"`
	FirstError  string   `json:"first_error,omitempty"`
}

// token is an EdDSA JWT (RFC 8037) for the reads that carry no envelope, as interop/go/token.go makes it.
func (id identity) token(audience string, lifetime time.Duration) string {
	now := time.Now().Unix()
	h, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": id.keyID})
	c, _ := json.Marshal(map[string]any{"iss": id.agentID, "sub": id.agentID, "aud": audience, "iat": now, "exp": now + int64(lifetime/time.Second)})
	signed := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	return signed + "." + b64url.EncodeToString(ed25519.Sign(id.priv, []byte(signed)))
}

// Opening streams is bounded so that a burst of 10,000 does not time itself out.
const openAtOnce = 1000

// cpuSince is the server's CPU time since before, or nil without -pid.
func cpuSince(pid int, before float64) *float64 {
	if pid <= 0 {
		return nil
	}
	now, err := cpuMs(pid)
	if err != nil {
		return nil
	}
	used := now - before
	return &used
}

func cpuNow(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	now, _ := cpuMs(pid)
	return now
}

func runWatch(sender grpc.ClientConnInterface, conns []grpc.ClientConnInterface, me identity, text string, watchers int, timeout time.Duration, pid int) (watchResult, error) {
	r := watchResult{Mode: "synapse-watch", Watchers: watchers, Connections: len(conns)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client, err := newSynapseClient(ctx, sender, me, map[string]any{"text": text, "require_approval": true})
	if err != nil {
		return r, err
	}
	p2p := synapsev1.NewP2PServiceClient(sender)
	req, sent, err := client.request()
	if err != nil {
		return r, err
	}
	resp, err := p2p.Send(ctx, req)
	if err != nil {
		return r, fmt.Errorf("Send task_request: %v", err)
	}
	// Send waits until the task is terminal or needs input: here, a human's decision.
	if err := client.check(resp, sent, synapsev1.TaskState_TASK_STATE_NEED_HUMAN); err != nil {
		return r, err
	}
	task := resp.GetTask()
	from := task.GetLastSequence() + 1

	// A token is checked when a stream opens; the server takes none valid for more than 5 minutes.
	streamCtx := withBearer(ctx, me.token(client.executor.agentID, 4*time.Minute))
	var opened, received sync.WaitGroup
	var heartbeats, failures atomic.Int64
	var firstError atomic.Value
	fail := func(err error) {
		failures.Add(1)
		firstError.CompareAndSwap(nil, err.Error())
	}
	arrivals := make([]time.Time, watchers)
	gate := make(chan struct{}, openAtOnce)
	var openedCount atomic.Int64
	openStart := time.Now()
	openCPU := cpuNow(pid)
	for i := range watchers {
		opened.Add(1)
		received.Add(1)
		gate <- struct{}{}
		go func(i int) {
			snapshot, event := false, false
			defer func() {
				if !snapshot {
					<-gate
					opened.Done()
				}
				if !event {
					received.Done()
				}
			}()
			stream, err := synapsev1.NewP2PServiceClient(conns[i%len(conns)]).Watch(streamCtx, &synapsev1.WatchRequest{TaskId: sent.GetTaskId(), FromSequence: from})
			if err != nil {
				fail(fmt.Errorf("Watch: %v", err))
				return
			}
			for {
				msg, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					if !event {
						fail(fmt.Errorf("stream ended without the event"))
					}
					return
				}
				if err != nil {
					if !event {
						fail(fmt.Errorf("Watch stream: %v", err))
					}
					return
				}
				switch kind := msg.GetKind().(type) {
				case *synapsev1.WatchResponse_Snapshot:
					if !snapshot {
						snapshot = true
						openedCount.Add(1)
						<-gate
						opened.Done()
					}
				case *synapsev1.WatchResponse_Heartbeat:
					heartbeats.Add(1)
				case *synapsev1.WatchResponse_Event:
					if !event && kind.Event.GetSequence() >= from {
						arrivals[i] = time.Now()
						event = true
						received.Done()
					}
				}
			}
		}(i)
	}
	opened.Wait()
	r.OpenMs = float64(time.Since(openStart)) / float64(time.Millisecond)
	r.Opened = int(openedCount.Load())
	r.OpenCPUMs = cpuSince(pid, openCPU)
	// Let the server finish setting up the last streams before the event.
	time.Sleep(time.Second)

	cancelPayload := &synapsev1.TaskCancelPayload{TaskId: sent.GetTaskId(), Reason: "watch fan-out bench"}
	env, cancelHeader, err := me.seal(synapsev1.MessageType_MESSAGE_TYPE_TASK_CANCEL, cancelPayload, client.executor.agentID, sent.GetTaskId())
	if err != nil {
		return r, err
	}
	fanoutCPU := cpuNow(pid)
	t0 := time.Now()
	cancelResp, err := p2p.Send(ctx, &synapsev1.SendRequest{Envelope: env})
	r.SendMs = float64(time.Since(t0)) / float64(time.Millisecond)
	if err != nil {
		return r, fmt.Errorf("Send task_cancel: %v", err)
	}
	reply, err := openReply(cancelResp.GetReply().GetEnvelope(), client.executor, me.agentID)
	if err != nil {
		return r, err
	}
	if reply.GetMessageType() != synapsev1.MessageType_MESSAGE_TYPE_TASK_ACK || reply.GetReplyTo() != cancelHeader.GetMessageId() {
		return r, fmt.Errorf("task_cancel answered with %v", reply.GetMessageType())
	}
	received.Wait()
	r.FanoutCPUMs = cpuSince(pid, fanoutCPU)

	var delays []time.Duration
	for _, at := range arrivals {
		if !at.IsZero() {
			delays = append(delays, at.Sub(t0))
		}
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	r.Received = len(delays)
	if len(delays) > 0 {
		r.FanoutMs = float64(delays[len(delays)-1]) / float64(time.Millisecond)
		r.FanoutP50Ms = percentile(delays, 50)
	}
	r.Heartbeats = heartbeats.Load()
	r.Errors = failures.Load()
	if e, ok := firstError.Load().(string); ok {
		r.FirstError = e
	}
	return r, nil
}

// withBearer attaches `authorization: Bearer <token>` to outgoing gRPC metadata.
func withBearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
