package synapse

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// craft signs a JWT with arbitrary header and claims.
func craft(t *testing.T, id *Identity, header, claims map[string]any) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	return signed + "." + b64url.EncodeToString(id.Sign([]byte(signed)))
}

func mustIdentity(t *testing.T) *Identity {
	t.Helper()
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestTokenRoundTrip(t *testing.T) {
	caller := mustIdentity(t)
	token, err := caller.Token("agent_server", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var header map[string]any
	if err := decodeSegment(strings.Split(token, ".")[0], &header); err != nil {
		t.Fatal(err)
	}
	jwk, _ := header["jwk"].(map[string]any)
	if header["alg"] != "EdDSA" || header["kid"] != caller.KeyID || jwk["x"] != b64url.EncodeToString(caller.PublicKey) || jwk["kty"] != "OKP" {
		t.Fatalf("protected header %v", header)
	}
	var claims map[string]any
	_ = decodeSegment(strings.Split(token, ".")[1], &claims)
	if claims["iss"] != caller.AgentID || claims["sub"] != caller.AgentID || claims["aud"] != "agent_server" || claims["exp"].(float64)-claims["iat"].(float64) != 120 {
		t.Fatalf("claims %v", claims)
	}
	// A receiver that pins on first use takes the self-certifying caller from the embedded jwk...
	trust := TrustOnFirstUse()
	got, err := VerifyToken(token, VerifyTokenOptions{Audience: "agent_server", Trust: trust})
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentID != caller.AgentID || got.KeyID != caller.KeyID {
		t.Fatalf("caller %+v", got)
	}
	// ...and pins it.
	if !trust.KeyFor(caller.KeyID).Equal(caller.PublicKey) {
		t.Fatal("the caller's key was not pinned")
	}
	// Lifetimes above the maximum are clamped to it.
	long, _ := caller.Token("agent_server", time.Hour)
	_ = decodeSegment(strings.Split(long, ".")[1], &claims)
	if claims["exp"].(float64)-claims["iat"].(float64) != MaxTokenLifetime.Seconds() {
		t.Fatalf("a 1 h token lives %v s", claims["exp"].(float64)-claims["iat"].(float64))
	}
}

func TestTokenRefusals(t *testing.T) {
	caller := mustIdentity(t)
	other := mustIdentity(t)
	now := time.Unix(1_800_000_000, 0)
	at := func() time.Time { return now }
	header := func() map[string]any {
		return map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": caller.KeyID, "jwk": map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64url.EncodeToString(caller.PublicKey)}}
	}
	claims := func(iat, exp int64) map[string]any {
		return map[string]any{"iss": caller.AgentID, "sub": caller.AgentID, "aud": "agent_server", "iat": iat, "exp": exp}
	}
	n := now.Unix()
	cases := []struct {
		name   string
		token  string
		trust  TrustPolicy
		accept bool
	}{
		{"valid", craft(t, caller, header(), claims(n, n+60)), nil, true},
		{"aud as an array", craft(t, caller, header(), map[string]any{"iss": caller.AgentID, "sub": caller.AgentID, "aud": []string{"x", "agent_server"}, "iat": n, "exp": n + 60}), nil, true},
		{"wrong audience", craft(t, caller, header(), map[string]any{"iss": caller.AgentID, "sub": caller.AgentID, "aud": "someone_else", "iat": n, "exp": n + 60}), nil, false},
		{"expired 59 s ago (within the tolerance)", craft(t, caller, header(), claims(n-119, n-59)), nil, true},
		{"expired 60 s ago", craft(t, caller, header(), claims(n-120, n-60)), nil, false},
		{"iat 60 s ahead", craft(t, caller, header(), claims(n+60, n+120)), nil, true},
		{"iat 61 s ahead", craft(t, caller, header(), claims(n+61, n+121)), nil, false},
		{"lifetime 300 s", craft(t, caller, header(), claims(n, n+300)), nil, true},
		{"lifetime 301 s", craft(t, caller, header(), claims(n, n+301)), nil, false},
		{"exp equal to iat", craft(t, caller, header(), claims(n, n)), nil, false},
		{"no iat", craft(t, caller, header(), map[string]any{"iss": caller.AgentID, "sub": caller.AgentID, "aud": "agent_server", "exp": n + 60}), nil, false},
		{"iss differs from sub", craft(t, caller, header(), map[string]any{"iss": other.AgentID, "sub": caller.AgentID, "aud": "agent_server", "iat": n, "exp": n + 60}), nil, false},
		{"signed by another key", craft(t, other, header(), claims(n, n+60)), nil, false},
		{"alg none", func() string {
			h := header()
			h["alg"] = "none"
			return craft(t, caller, h, claims(n, n+60))
		}(), nil, false},
		{"no jwk and an unknown key", func() string {
			h := header()
			delete(h, "jwk")
			return craft(t, caller, h, claims(n, n+60))
		}(), nil, false},
		{"no jwk, the key known", func() string {
			h := header()
			delete(h, "jwk")
			return craft(t, caller, h, claims(n, n+60))
		}(), NewTrustStore(caller.Ref()), true},
		{"a jwk whose thumbprint is not the kid", func() string {
			h := header()
			h["jwk"] = map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64url.EncodeToString(other.PublicKey)}
			return craft(t, caller, h, claims(n, n+60))
		}(), nil, false},
		{"an id not derived from the key", craft(t, caller, header(), map[string]any{"iss": "agent_alice", "sub": "agent_alice", "aud": "agent_server", "iat": n, "exp": n + 60}), nil, false},
		{"an id pinned to another key", craft(t, caller, header(), claims(n, n+60)), NewTrustStore(Peer{AgentID: caller.AgentID, PublicKey: other.PublicKey}), false},
		{"not a JWT", "abc.def", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			trust := c.trust
			if trust == nil {
				trust = TrustOnFirstUse()
			}
			caller, err := VerifyToken(c.token, VerifyTokenOptions{Audience: "agent_server", Trust: trust, Now: at})
			if c.accept && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.accept {
				if err == nil {
					t.Fatalf("accepted as %+v", caller)
				}
				if ProtocolCode(err) != "unauthenticated" {
					t.Fatalf("refused with %v, want unauthenticated", err)
				}
			}
		})
	}
}

func TestTokenNeedsAnAudience(t *testing.T) {
	if _, err := mustIdentity(t).Token("", time.Minute); err == nil {
		t.Fatal("a token without an audience was made")
	}
}
