package synapse

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

// Refusal is a protocol error: what a receiver answers when it refuses a
// message, a token or a request (PROTOCOL.md §3). As a gRPC handler's error
// it becomes a status with the mapped code and a synapse.v1.ErrorDetail.
type Refusal struct {
	// Code is the protocol error code (its spelling is ProtocolCode).
	Code synapsev1.ErrorCode
	// Message explains the refusal.
	Message string
	// Details is optional machine-readable context (JSON-like values).
	Details map[string]any
	// Status overrides the RPC status code GRPCCode maps Code to (zero: the
	// mapping), as for a task id already in use (invalid_params, ALREADY_EXISTS).
	Status codes.Code
}

func refuse(code synapsev1.ErrorCode, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements error: "<protocol_code>: <message>".
func (r *Refusal) Error() string { return r.ProtocolCode() + ": " + r.Message }

// ProtocolCode is the code's string spelling, e.g. "signature_invalid".
func (r *Refusal) ProtocolCode() string { return ProtocolCodeOf(r.Code) }

// ProtocolCodeOf is an ErrorCode's string spelling: the enum name without
// ERROR_CODE_, lower-cased.
func ProtocolCodeOf(code synapsev1.ErrorCode) string {
	return strings.ToLower(strings.TrimPrefix(code.String(), "ERROR_CODE_"))
}

// ErrorDetail is the refusal as the synapse.v1.ErrorDetail that travels.
func (r *Refusal) ErrorDetail() *synapsev1.ErrorDetail {
	d := &synapsev1.ErrorDetail{Code: r.Code, Message: r.Message, ProtocolCode: r.ProtocolCode()}
	if len(r.Details) > 0 {
		if s, err := structpb.NewStruct(r.Details); err == nil {
			d.Details = s
		}
	}
	return d
}

// GRPCStatus makes a Refusal returned by a grpc-go handler travel as the
// mapped status code with its ErrorDetail in grpc-status-details-bin.
func (r *Refusal) GRPCStatus() *status.Status {
	code := r.Status
	if code == codes.OK {
		code = GRPCCode(r.Code)
	}
	st := status.New(code, r.Message)
	if withDetail, err := st.WithDetails(r.ErrorDetail()); err == nil {
		return withDetail
	}
	return st
}

// GRPCCode is the RPC status code that carries an ErrorCode (PROTOCOL.md §3).
func GRPCCode(code synapsev1.ErrorCode) codes.Code {
	switch code {
	case synapsev1.ErrorCode_ERROR_CODE_MESSAGE_FORMAT_INVALID, synapsev1.ErrorCode_ERROR_CODE_INVALID_PARAMS,
		synapsev1.ErrorCode_ERROR_CODE_CONFIDENTIALITY_REQUIRED, synapsev1.ErrorCode_ERROR_CODE_DECRYPTION_FAILED,
		synapsev1.ErrorCode_ERROR_CODE_ENCRYPTION_KEY_UNKNOWN, synapsev1.ErrorCode_ERROR_CODE_INNER_SIGNATURE_INVALID:
		return codes.InvalidArgument
	case synapsev1.ErrorCode_ERROR_CODE_SIGNATURE_INVALID, synapsev1.ErrorCode_ERROR_CODE_MESSAGE_EXPIRED,
		synapsev1.ErrorCode_ERROR_CODE_UNKNOWN_SENDER, synapsev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED:
		return codes.Unauthenticated
	case synapsev1.ErrorCode_ERROR_CODE_TASK_NOT_FOUND:
		return codes.NotFound
	case synapsev1.ErrorCode_ERROR_CODE_REPLAY_DETECTED:
		return codes.AlreadyExists
	case synapsev1.ErrorCode_ERROR_CODE_WRONG_RECEIVER, synapsev1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
		synapsev1.ErrorCode_ERROR_CODE_CAPABILITY_LACKING:
		return codes.PermissionDenied
	case synapsev1.ErrorCode_ERROR_CODE_ILLEGAL_TRANSITION, synapsev1.ErrorCode_ERROR_CODE_TASK_ALREADY_COMPLETED,
		synapsev1.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION:
		return codes.FailedPrecondition
	case synapsev1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE, synapsev1.ErrorCode_ERROR_CODE_CONCURRENCY_LIMIT,
		synapsev1.ErrorCode_ERROR_CODE_RATE_LIMITED:
		return codes.ResourceExhausted
	case synapsev1.ErrorCode_ERROR_CODE_EXECUTION_TIMEOUT, synapsev1.ErrorCode_ERROR_CODE_TASK_DURATION_EXCEEDED:
		return codes.DeadlineExceeded
	case synapsev1.ErrorCode_ERROR_CODE_TASK_CANCELLED:
		return codes.Canceled
	case synapsev1.ErrorCode_ERROR_CODE_AGENT_NOT_READY:
		return codes.Unavailable
	default:
		return codes.Internal
	}
}

// ErrorDetailOf finds the synapse.v1.ErrorDetail of an error: a *Refusal's,
// or the one a server attached to a gRPC status. It returns nil when there
// is none.
func ErrorDetailOf(err error) *synapsev1.ErrorDetail {
	var r *Refusal
	if errors.As(err, &r) {
		return r.ErrorDetail()
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if detail, ok := d.(*synapsev1.ErrorDetail); ok {
			return detail
		}
	}
	return nil
}

// ProtocolCode is the protocol code of an error ("signature_invalid",
// "task_not_found", ...), from a *Refusal or a gRPC status's ErrorDetail;
// "" when the error carries none.
func ProtocolCode(err error) string {
	if d := ErrorDetailOf(err); d != nil {
		if d.GetProtocolCode() != "" {
			return d.GetProtocolCode()
		}
		return ProtocolCodeOf(d.GetCode())
	}
	return ""
}
