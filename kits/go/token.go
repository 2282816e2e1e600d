package synapse

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/synapse-connect/synapse-go/synapsev1"
)

const (
	// MaxTokenLifetime is the longest a bearer token may live (exp - iat).
	MaxTokenLifetime = 300 * time.Second
	// TokenClockTolerance applies to a token's exp and iat, whatever clock
	// skew a receiver allows envelopes (PROTOCOL.md §5.4).
	TokenClockTolerance = 60 * time.Second
)

type jwtHeader struct {
	Alg  string          `json:"alg"`
	Typ  string          `json:"typ,omitempty"`
	Kid  string          `json:"kid"`
	JWK  *jwk            `json:"jwk,omitempty"`
	Crit json.RawMessage `json:"crit,omitempty"`
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

// Token makes a bearer token for the RPCs that carry no envelope (GetTask,
// ListTasks, Watch, ReadResult): an EdDSA JWT (RFC 8037) signed by the
// identity, with kid its key id, its public key as jwk, iss and sub its
// agent id, aud the agent called, iat now and exp now + lifetime (at most
// MaxTokenLifetime; zero means the maximum).
func (id *Identity) Token(audience string, lifetime time.Duration) (string, error) {
	return id.TokenAt(audience, lifetime, time.Now())
}

// TokenAt is Token with iat taken from now.
func (id *Identity) TokenAt(audience string, lifetime time.Duration, now time.Time) (string, error) {
	if audience == "" {
		return "", errors.New("synapse: a token needs an audience (the agent id called)")
	}
	if lifetime == 0 || lifetime > MaxTokenLifetime {
		lifetime = MaxTokenLifetime
	}
	seconds := int64(lifetime / time.Second)
	if seconds < 1 {
		return "", fmt.Errorf("synapse: token lifetime %s is not positive", lifetime)
	}
	iat := now.Unix()
	h, err := json.Marshal(jwtHeader{Alg: "EdDSA", Typ: "JWT", Kid: id.KeyID, JWK: &jwk{Kty: "OKP", Crv: "Ed25519", X: b64url.EncodeToString(id.PublicKey)}})
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(map[string]any{"iss": id.AgentID, "sub": id.AgentID, "aud": audience, "iat": iat, "exp": iat + seconds})
	if err != nil {
		return "", err
	}
	signed := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	return signed + "." + b64url.EncodeToString(id.Sign([]byte(signed))), nil
}

// Caller is who a verified bearer token speaks for.
type Caller struct {
	AgentID string
	KeyID   string
}

// VerifyTokenOptions are a receiver's settings for VerifyToken.
type VerifyTokenOptions struct {
	// Audience is the receiver's own agent id (required).
	Audience string
	// Trust decides whether the token's key speaks for its agent id (required).
	Trust TrustPolicy
	// Now defaults to time.Now.
	Now func() time.Time
}

// VerifyToken checks a bearer token as PROTOCOL.md §5.4 says: alg EdDSA, a
// kid, the key from the trust policy or the embedded jwk (whose thumbprint
// must be the kid), the signature, aud the receiver, iss = sub, iat and exp
// present with exp after iat by at most MaxTokenLifetime, not expired (60 s
// tolerance) and iat at most 60 s ahead; then the trust policy must vouch for
// the key speaking for sub. Any refusal is a *Refusal "unauthenticated".
func VerifyToken(token string, opt VerifyTokenOptions) (*Caller, error) {
	fail := func(format string, args ...any) (*Caller, error) {
		return nil, refuse(synapsev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED, "bearer token "+format, args...)
	}
	if opt.Trust == nil || opt.Audience == "" {
		return nil, errors.New("synapse: VerifyToken needs an Audience and a TrustPolicy")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fail("is not a JWT")
	}
	var header jwtHeader
	if err := decodeSegment(parts[0], &header); err != nil {
		return fail("is not a JWT")
	}
	if header.Alg != "EdDSA" {
		return fail("must be signed with EdDSA (Ed25519)")
	}
	if len(header.Crit) > 0 {
		return fail("has critical header parameters this receiver does not understand")
	}
	if header.Kid == "" {
		return fail("has no kid")
	}
	pub := opt.Trust.KeyFor(header.Kid)
	if pub == nil && header.JWK != nil && header.JWK.Kty == "OKP" && header.JWK.Crv == "Ed25519" {
		if x, err := b64url.DecodeString(header.JWK.X); err == nil && len(x) == ed25519.PublicKeySize && KeyID(x) == header.Kid {
			pub = x
		}
	}
	if pub == nil {
		return fail("names kid %s, whose public key is not known", clip(header.Kid))
	}
	sig, err := b64url.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return fail("signature does not verify")
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return fail("claims are not a JSON object")
	}
	iss, _ := claims["iss"].(string)
	sub, _ := claims["sub"].(string)
	iat, iatOK := numericDate(claims["iat"])
	exp, expOK := numericDate(claims["exp"])
	if iss == "" || sub == "" || !iatOK || !expOK || claims["aud"] == nil {
		return fail("must carry iss, sub, aud, iat and exp")
	}
	if !hasAudience(claims["aud"], opt.Audience) {
		return fail("claim aud is not this agent (%s)", opt.Audience)
	}
	now := time.Now()
	if opt.Now != nil {
		now = opt.Now()
	}
	nowSecs := float64(now.UnixNano()) / 1e9
	tolerance := TokenClockTolerance.Seconds()
	if exp <= nowSecs-tolerance {
		return fail("has expired")
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && nbf > nowSecs+tolerance {
		return fail("is not valid yet (nbf)")
	}
	if iss != sub {
		return fail("iss and sub must both be the caller's agent id")
	}
	if iat > math.Floor(nowSecs)+tolerance {
		return fail("iat is in the future")
	}
	if exp <= iat {
		return fail("exp must be after iat")
	}
	if exp-iat > MaxTokenLifetime.Seconds() {
		return fail("lifetime exceeds %d s", int(MaxTokenLifetime.Seconds()))
	}
	if opt.Trust.Check(sub, header.Kid, pub) != Trusted {
		return fail("agent %s with key %s is not trusted", clip(sub), clip(header.Kid))
	}
	if p, ok := opt.Trust.(Pinner); ok {
		p.Accepted(sub, header.Kid, pub)
	}
	return &Caller{AgentID: sub, KeyID: header.Kid}, nil
}

func decodeSegment(segment string, v any) error {
	b, err := b64url.DecodeString(segment)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func numericDate(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func hasAudience(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// WithBearer attaches `authorization: Bearer <token>` to an outgoing gRPC call.
func WithBearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// BearerToken is the bearer token of an incoming gRPC call, or "".
func BearerToken(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
	}
	return ""
}
