// Bearer tokens for the RPCs that carry no envelope (Watch, GetTask, ...):
// a hand-rolled EdDSA JWT (RFC 8037, JWS compact serialization) signed with
// crypto/ed25519. Header {"alg":"EdDSA","typ":"JWT","kid":<key id>}; claims
// iss = sub = the caller's agent id, aud = the agent called, iat, exp.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"time"

	"google.golang.org/grpc/metadata"
)

type jwtHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

type jwtClaims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud string `json:"aud"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
}

// token signs a JWT for audience, valid for lifetime from now.
func (id identity) token(audience string, lifetime time.Duration) string {
	now := time.Now().Unix()
	h, _ := json.Marshal(jwtHeader{Alg: "EdDSA", Typ: "JWT", Kid: id.keyID})
	c, _ := json.Marshal(jwtClaims{Iss: id.agentID, Sub: id.agentID, Aud: audience, Iat: now, Exp: now + int64(lifetime/time.Second)})
	signed := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	return signed + "." + b64url.EncodeToString(ed25519.Sign(id.priv, []byte(signed)))
}

// withBearer attaches `authorization: Bearer <token>` to outgoing gRPC metadata.
func withBearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
