// The identity the console acts as: its self-certifying agent id, key id and
// public key, how the private key is held, and the ways to change it: import
// a key (`synapse keygen`'s agent.key, or an OKP JWK) or make a new one.
// Changing it reloads the page: every task and token belongs to one identity.
import { toBase64Url } from "./bytes.js";
import { importIdentity, replaceWithNewIdentity, type HeldIdentity } from "./identity.js";
import { describeError } from "./rpc.js";
import { button, el, show } from "./view.js";

const BACKENDS = {
  webcrypto: "WebCrypto Ed25519: a non-extractable key in this browser's IndexedDB (the page signs with it but cannot read it)",
  tweetnacl: "tweetnacl (this browser has no Ed25519 in WebCrypto): the seed is kept in this browser's IndexedDB",
};

export function identityView(container: HTMLElement, held: HeldIdentity): void {
  const { identity } = held;
  const status = el("p", { class: "form-status", role: "status", "data-testid": "identity-status" });
  const textarea = el("textarea", {
    id: "import-key",
    rows: "6",
    spellcheck: "false",
    "data-testid": "import-key",
    placeholder: "-----BEGIN PRIVATE KEY-----\n…\n-----END PRIVATE KEY-----\n\nor {\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"…\",\"x\":\"…\"}",
  });
  const file = el("input", { id: "import-file", type: "file", accept: ".key,.pem,.json,application/json,application/x-pem-file,text/plain", "data-testid": "import-file" });
  file.addEventListener("change", () => {
    const chosen = file.files?.[0];
    if (chosen !== undefined) void chosen.text().then((text) => (textarea.value = text));
  });
  const replace = (action: () => Promise<HeldIdentity>, done: string) => {
    status.className = "form-status";
    status.textContent = "working…";
    action()
      .then((next) => {
        textarea.value = "";
        status.className = "form-status ok";
        status.textContent = `${done}: ${next.identity.agentId}. Reloading…`;
        location.reload();
      })
      .catch((error: unknown) => {
        status.className = "form-status bad";
        status.textContent = `✗ ${describeError(error)}`;
      });
  };
  const importForm = el(
    "form",
    { class: "import", "data-testid": "import-form", "aria-labelledby": "import-title" },
    el("h3", { id: "import-title" }, "Use another key"),
    el("p", {}, "Paste a private key, or choose its file: the ", el("code", {}, "agent.key"), " that ", el("code", {}, "synapse keygen"), " writes (PKCS#8 PEM), or an Ed25519 JSON Web Key with its private part. The key is kept in this browser; nothing is sent. To view every task, import the key whose id the server names with ", el("code", {}, "--operator"), "."),
    el("div", { class: "field" }, el("label", { for: textarea.id }, "Private key"), textarea),
    el("div", { class: "field" }, el("label", { for: file.id }, "…or its file"), file),
    el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", "data-testid": "import-submit" }, "Import and use this key")),
  );
  importForm.addEventListener("submit", (event) => {
    event.preventDefault();
    replace(() => importIdentity(textarea.value), "now acting as");
  });
  show(
    container,
    el("h2", {}, "Identity"),
    el("p", { class: "lede" }, "The console acts as this requester: it signs tasks and answers with this key, and reads the tasks it requested with bearer tokens signed by it."),
    el(
      "dl",
      { class: "facts" },
      el("dt", {}, "Agent id"),
      el("dd", {}, el("code", { "data-testid": "requester-id" }, identity.agentId), el("small", {}, " (derived from the key: self-certifying)")),
      el("dt", {}, "Key id"),
      el("dd", {}, el("code", { "data-testid": "requester-key-id" }, identity.keyId)),
      el("dt", {}, "Public key"),
      el("dd", {}, el("code", {}, toBase64Url(identity.publicKey))),
      el("dt", {}, "Private key"),
      el("dd", { "data-testid": "key-backend", "data-backend": identity.backend }, BACKENDS[identity.backend]),
      el("dt", {}, "Encryption key"),
      held.encryption !== undefined
        ? el(
            "dd",
            { "data-testid": "encryption-key", "data-available": "true" },
            "X25519 for confidential tasks, non-extractable in this browser's IndexedDB: key id ",
            el("code", { "data-testid": "encryption-key-id" }, held.encryption.keyId),
          )
        : el(
            "dd",
            { "data-testid": "encryption-key", "data-available": "false", class: "bad" },
            "none: this browser has no X25519 in WebCrypto, so confidential tasks are shown sealed and cannot be sent from here",
          ),
      el("dt", {}, "Origin"),
      el("dd", { "data-testid": "key-source" }, held.source === "imported" ? "imported" : "made in this browser"),
    ),
    importForm,
    el(
      "section",
      { class: "danger-zone", "aria-labelledby": "new-title" },
      el("h3", { id: "new-title" }, "Start over"),
      el("p", {}, "A new key is a new requester: the tasks this one requested stay with this key, which the console then forgets."),
      button("Make a new identity", () => replace(replaceWithNewIdentity, "new identity"), { class: "danger", "data-testid": "new-identity" }),
    ),
    status,
  );
}
