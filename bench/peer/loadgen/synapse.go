// Synapse's side: every request is a fresh signed task_request envelope
// (new task id and message id, sent now) for text_analysis, sent through
// P2PService.Send with wait, as gRPC or as the Connect protocol with the JSON
// codec over HTTP/1.1. A request counts only if the reply's signature
// verifies with the executor's key, the reply is a task_confirm for this
// task answering this message, and the task shown is COMPLETED.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	synapsev1 "synapse-peer-loadgen/gen/synapse/v1"
)

// sendWait is how long Send may hold the reply for the task to finish.
const sendWait = 30 * time.Second

type synapseClient struct {
	me       identity
	executor peer
	input    *structpb.Struct // the same payload for every task: only the ids change
}

// executorOf asks the server who it is (GetCapabilities) and checks that its key id matches its key.
func executorOf(ctx context.Context, conn grpc.ClientConnInterface) (peer, error) {
	resp, err := synapsev1.NewCapabilitiesServiceClient(conn).GetCapabilities(ctx, &synapsev1.GetCapabilitiesRequest{})
	if err != nil {
		return peer{}, fmt.Errorf("GetCapabilities: %v", err)
	}
	c := resp.GetCapabilities()
	if len(c.GetPublicKey()) != 32 || keyID(c.GetPublicKey()) != c.GetKeyId() {
		return peer{}, fmt.Errorf("the server declares no usable key: %v", c)
	}
	return peer{agentID: c.GetAgentId(), keyID: c.GetKeyId(), pub: c.GetPublicKey()}, nil
}

func newSynapseClient(ctx context.Context, conn grpc.ClientConnInterface, me identity, fields map[string]any) (*synapseClient, error) {
	executor, err := executorOf(ctx, conn)
	if err != nil {
		return nil, err
	}
	input, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, err
	}
	return &synapseClient{me: me, executor: executor, input: input}, nil
}

// request seals a new task_request.
func (c *synapseClient) request() (*synapsev1.SendRequest, *synapsev1.Header, error) {
	taskID := newID()
	payload := &synapsev1.TaskRequestPayload{Task: &synapsev1.TaskSpec{Id: taskID, Type: "text_analysis", Payload: c.input}}
	env, header, err := c.me.seal(synapsev1.MessageType_MESSAGE_TYPE_TASK_REQUEST, payload, c.executor.agentID, taskID)
	if err != nil {
		return nil, nil, err
	}
	return &synapsev1.SendRequest{Envelope: env, Wait: durationpb.New(sendWait)}, header, nil
}

// check verifies Send's answer to the request whose header is sent.
func (c *synapseClient) check(resp *synapsev1.SendResponse, sent *synapsev1.Header, want synapsev1.TaskState) error {
	reply, err := openReply(resp.GetReply().GetEnvelope(), c.executor, c.me.agentID)
	if err != nil {
		return err
	}
	if reply.GetMessageType() != synapsev1.MessageType_MESSAGE_TYPE_TASK_CONFIRM {
		return fmt.Errorf("reply is %v, not a task_confirm", reply.GetMessageType())
	}
	if reply.GetTaskId() != sent.GetTaskId() || reply.GetReplyTo() != sent.GetMessageId() {
		return fmt.Errorf("reply is about task %q / message %q, not %q / %q", reply.GetTaskId(), reply.GetReplyTo(), sent.GetTaskId(), sent.GetMessageId())
	}
	if got := resp.GetTask().GetState(); got != want {
		return fmt.Errorf("task %s is %v, want %v (%s)", sent.GetTaskId(), got, want, resp.GetTask().GetStatusMessage())
	}
	return nil
}

// grpcCall sends over gRPC (binary protobuf, HTTP/2).
func (c *synapseClient) grpcCall(conn grpc.ClientConnInterface) call {
	p2p := synapsev1.NewP2PServiceClient(conn)
	return func(ctx context.Context) error {
		req, sent, err := c.request()
		if err != nil {
			return err
		}
		resp, err := p2p.Send(ctx, req)
		if err != nil {
			return fmt.Errorf("Send: %v", err)
		}
		return c.check(resp, sent, synapsev1.TaskState_TASK_STATE_COMPLETED)
	}
}

// connectJSONCall sends with the Connect protocol: POST /synapse.v1.P2PService/Send, application/json, HTTP/1.1.
func (c *synapseClient) connectJSONCall(client *http.Client, baseURL string) call {
	url := baseURL + "/synapse.v1.P2PService/Send"
	decode := protojson.UnmarshalOptions{DiscardUnknown: true}
	return func(ctx context.Context) error {
		req, sent, err := c.request()
		if err != nil {
			return err
		}
		body, err := protojson.Marshal(req)
		if err != nil {
			return err
		}
		httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		httpReq.Header.Set("Content-Type", "application/json")
		httpReq.Header.Set("Connect-Protocol-Version", "1")
		httpResp, err := client.Do(httpReq)
		if err != nil {
			return fmt.Errorf("POST Send: %v", err)
		}
		raw, err := io.ReadAll(httpResp.Body)
		httpResp.Body.Close()
		if err != nil {
			return fmt.Errorf("POST Send: reading the answer: %v", err)
		}
		if httpResp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST Send: HTTP %d: %.300s", httpResp.StatusCode, raw)
		}
		resp := &synapsev1.SendResponse{}
		if err := decode.Unmarshal(raw, resp); err != nil {
			return fmt.Errorf("POST Send: the answer does not parse: %v", err)
		}
		return c.check(resp, sent, synapsev1.TaskState_TASK_STATE_COMPLETED)
	}
}
