package synapse

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// refusingSends is an agent's P2PService whose first Sends fail with code,
// as a server shutting down answers them (a stream refused with HTTP/2
// REFUSED_STREAM reaches a gRPC client as UNAVAILABLE too).
type refusingSends struct {
	*p2pServer
	mu     sync.Mutex
	refuse int
	code   codes.Code
	seen   []*synapsev1.Envelope
}

func (r *refusingSends) Send(ctx context.Context, req *synapsev1.SendRequest) (*synapsev1.SendResponse, error) {
	r.mu.Lock()
	r.seen = append(r.seen, proto.Clone(req.GetEnvelope()).(*synapsev1.Envelope))
	refused := r.refuse > 0
	if refused {
		r.refuse--
	}
	r.mu.Unlock()
	if refused {
		return nil, status.Error(r.code, "the agent is shutting down")
	}
	return r.p2pServer.Send(ctx, req)
}

func refusingAgent(t *testing.T, refuse int, code codes.Code) (*refusingSends, string) {
	t.Helper()
	agent, _ := testAgent(t)
	front := &refusingSends{p2pServer: &p2pServer{a: agent}, refuse: refuse, code: code}
	url := serve(t, func(s *grpc.Server) {
		synapsev1.RegisterCapabilitiesServiceServer(s, &capabilitiesServer{a: agent})
		synapsev1.RegisterP2PServiceServer(s, front)
	})
	return front, url
}

func connectWith(t *testing.T, url string, opts ClientOptions) *Client {
	t.Helper()
	conn, err := Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c, err := NewClient(context.Background(), conn, mustIdentity(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSendIsSentAgainAfterUnavailable(t *testing.T) {
	front, url := refusingAgent(t, 2, codes.Unavailable)
	c := connectWith(t, url, ClientOptions{RetryBaseDelay: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent, err := c.Submit(ctx, "upper", map[string]any{"text": "again"}, SubmitOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Task.GetState() != synapsev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task state %v, want completed", sent.Task.GetState())
	}
	if len(front.seen) != 3 {
		t.Fatalf("%d Sends reached the server, want 3 (two refused, one answered)", len(front.seen))
	}
	for i, env := range front.seen {
		if !proto.Equal(env, front.seen[0]) {
			t.Fatalf("Send %d carried another envelope than the first", i+1)
		}
	}
}

func TestSendGivesUpAfterSendRetries(t *testing.T) {
	front, url := refusingAgent(t, 10, codes.Unavailable)
	c := connectWith(t, url, ClientOptions{RetryBaseDelay: 10 * time.Millisecond, SendRetries: 2})
	_, err := c.Submit(context.Background(), "upper", map[string]any{"text": "never"}, SubmitOptions{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error %v, want UNAVAILABLE", err)
	}
	if len(front.seen) != 3 {
		t.Fatalf("%d Sends, want 3 (the first and two more)", len(front.seen))
	}
}

func TestSendIsNotSentAgainAfterOtherErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.Internal, codes.InvalidArgument, codes.ResourceExhausted} {
		front, url := refusingAgent(t, 1, code)
		c := connectWith(t, url, ClientOptions{RetryBaseDelay: 10 * time.Millisecond})
		_, err := c.Submit(context.Background(), "upper", map[string]any{"text": "once"}, SubmitOptions{})
		if status.Code(err) != code {
			t.Fatalf("error %v, want %v", err, code)
		}
		if len(front.seen) != 1 {
			t.Fatalf("%v: %d Sends, want 1", code, len(front.seen))
		}
	}
}

func TestSendRetriesMinusOneSendsOnce(t *testing.T) {
	front, url := refusingAgent(t, 1, codes.Unavailable)
	c := connectWith(t, url, ClientOptions{SendRetries: -1})
	if _, err := c.Submit(context.Background(), "upper", map[string]any{"text": "once"}, SubmitOptions{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("error %v, want UNAVAILABLE", err)
	}
	if len(front.seen) != 1 {
		t.Fatalf("%d Sends, want 1", len(front.seen))
	}
}
