// The A2A-js peer's side: SendMessage with a user message holding the text,
// waiting for the task (return_immediately false, the default) and asking
// for no history back (history_length 0: the sender has its message, as
// Synapse's Send leaves the request out). A request counts only if the task
// came back COMPLETED with an artifact whose data holds the word count.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	a2av1 "synapse-peer-loadgen/gen/lf/a2a/v1"
)

// a2aVersion is the protocol version the SDK's servers check (A2A-Version header / metadata).
const a2aVersion = "1.0"

func a2aGrpcCall(conn grpc.ClientConnInterface, text string) call {
	client := a2av1.NewA2AServiceClient(conn)
	return func(ctx context.Context) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "a2a-version", a2aVersion)
		resp, err := client.SendMessage(ctx, &a2av1.SendMessageRequest{
			Message: &a2av1.Message{
				MessageId: uuidV4(),
				Role:      a2av1.Role_ROLE_USER,
				Parts:     []*a2av1.Part{{Content: &a2av1.Part_Text{Text: text}}},
			},
			Configuration: &a2av1.SendMessageConfiguration{HistoryLength: proto.Int32(0), ReturnImmediately: false},
		})
		if err != nil {
			return fmt.Errorf("SendMessage: %v", err)
		}
		task := resp.GetTask()
		if task.GetStatus().GetState() != a2av1.TaskState_TASK_STATE_COMPLETED {
			return fmt.Errorf("task %q is %v", task.GetId(), task.GetStatus().GetState())
		}
		for _, artifact := range task.GetArtifacts() {
			for _, part := range artifact.GetParts() {
				if words := part.GetData().GetStructValue().GetFields()["words"]; words.GetNumberValue() > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("task %q has no artifact with a word count", task.GetId())
	}
}

type jsonRPCPart struct {
	Text string         `json:"text,omitempty"`
	Data map[string]any `json:"data,omitempty"`
}

type jsonRPCRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  struct {
		Message struct {
			MessageID string        `json:"messageId"`
			Role      string        `json:"role"`
			Parts     []jsonRPCPart `json:"parts"`
		} `json:"message"`
		Configuration struct {
			HistoryLength     int  `json:"historyLength"`
			ReturnImmediately bool `json:"returnImmediately"`
		} `json:"configuration"`
	} `json:"params"`
}

type jsonRPCResponse struct {
	Result *struct {
		Task *struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Parts []jsonRPCPart `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// a2aJSONRPCCall posts the JSON-RPC 2.0 method SendMessage to the agent's HTTP endpoint (HTTP/1.1).
func a2aJSONRPCCall(client *http.Client, url, text string) call {
	var ids atomic.Int64
	return func(ctx context.Context) error {
		var req jsonRPCRequest
		req.JSONRPC, req.ID, req.Method = "2.0", ids.Add(1), "SendMessage"
		req.Params.Message.MessageID = uuidV4()
		req.Params.Message.Role = "ROLE_USER"
		req.Params.Message.Parts = []jsonRPCPart{{Text: text}}
		body, err := json.Marshal(&req)
		if err != nil {
			return err
		}
		httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		httpReq.Header.Set("Content-Type", "application/json")
		httpReq.Header.Set("A2A-Version", a2aVersion)
		httpResp, err := client.Do(httpReq)
		if err != nil {
			return fmt.Errorf("POST SendMessage: %v", err)
		}
		raw, err := io.ReadAll(httpResp.Body)
		httpResp.Body.Close()
		if err != nil {
			return fmt.Errorf("POST SendMessage: reading the answer: %v", err)
		}
		if httpResp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST SendMessage: HTTP %d: %.300s", httpResp.StatusCode, raw)
		}
		var resp jsonRPCResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			return fmt.Errorf("POST SendMessage: the answer does not parse: %v", err)
		}
		if resp.Error != nil {
			return fmt.Errorf("SendMessage: JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
		}
		if resp.Result == nil || resp.Result.Task == nil {
			return fmt.Errorf("SendMessage: no task in %.300s", raw)
		}
		task := resp.Result.Task
		if task.Status.State != "TASK_STATE_COMPLETED" {
			return fmt.Errorf("task %q is %s", task.ID, task.Status.State)
		}
		for _, artifact := range task.Artifacts {
			for _, part := range artifact.Parts {
				if words, ok := part.Data["words"].(float64); ok && words > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("task %q has no artifact with a word count", task.ID)
	}
}
