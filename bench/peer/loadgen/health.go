// The bare-call mode: grpc.health.v1.Health/Check with the empty service
// name, the cheapest unary call a Synapse server answers (no envelope, no
// store, no signature). What it costs the server is what its transport costs
// any call, so the bench can set the signed task against it.
package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func healthCall(conn grpc.ClientConnInterface) call {
	client := healthpb.NewHealthClient(conn)
	return func(ctx context.Context) error {
		reply, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("Check: %w", err)
		}
		if reply.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("Check: status %v, want SERVING", reply.GetStatus())
		}
		return nil
	}
}
