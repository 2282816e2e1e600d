// The `synapse` command through a real process: serve, keygen,
// capabilities, decode.
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectProtoJsonNames, runCli, startServe } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

describe("synapse serve", () => {
  it("creates its identity once, keeps it across restarts, and exits 0 on SIGTERM and SIGINT", async () => {
    const dataDir = await tempDir();
    const first = await startServe(["--data-dir", dataDir]);
    const shown = await runCli(["capabilities", first.url, "--json"]);
    expect(shown.code).toBe(0);
    const caps = (JSON.parse(shown.stdout) as { capabilities: { agentId: string; keyId: string } }).capabilities;
    expect(await first.stop("SIGTERM")).toBe(0);
    expect(first.stderr()).toContain('"msg":"stopped"');
    expect((await stat(join(dataDir, "agent.key"))).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(join(dataDir, "identity.json"), "utf8"))).toMatchObject({ agent_id: caps.agentId, key_id: caps.keyId });

    const second = await startServe(["--data-dir", dataDir]);
    const again = JSON.parse((await runCli(["capabilities", second.url, "--json", "--protocol", "grpc"])).stdout) as { capabilities: { agentId: string; keyId: string } };
    expect(again.capabilities).toMatchObject({ agentId: caps.agentId, keyId: caps.keyId });
    expect(await second.stop("SIGINT")).toBe(0);
  });

  it("takes HOST and PORT from the environment", async () => {
    const served = await startServe(["--data-dir", await tempDir()], { HOST: "127.0.0.1", PORT: "0" });
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const text = await runCli(["capabilities", served.url, "--protocol", "grpc-web"]);
    expect(text.stdout).toContain("text_analysis");
    expect(text.stdout).toContain("CapabilitiesProvider");
    expect(await served.stop()).toBe(0);
  });

  it("refuses bad flags with a usage error", async () => {
    const dataDir = await tempDir();
    const result = await runCli(["serve", "--port", "eighty", "--data-dir", dataDir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--port must be a non-negative integer");
    expect(await readdir(dataDir)).toEqual([]);
  });
});

describe("synapse keygen and decode", () => {
  it("creates an identity in SYNAPSE_HOME and shows it again", async () => {
    const home = await tempDir();
    const created = JSON.parse((await runCli(["keygen", "--json"], { env: { SYNAPSE_HOME: home } })).stdout) as { created: boolean; keyId: string };
    const shown = JSON.parse((await runCli(["keygen", "--json", "--home", home])).stdout) as { created: boolean; keyId: string };
    expect(created.created).toBe(true);
    expectProtoJsonNames(created);
    expect(shown).toMatchObject({ created: false, keyId: created.keyId });
  });

  it("verifies and prints an envelope, and exits 1 on a tampered one", async () => {
    const vectors = JSON.parse(await readFile(new URL("./vectors/envelopes.json", import.meta.url), "utf8")) as {
      positive: Array<{ envelope: { signature: { value: string } }; key_id: string }>;
    };
    const good = vectors.positive[0]!;
    const ok = await runCli(["decode", "--key-id", good.key_id], { input: JSON.stringify({ envelope: good.envelope }) });
    expect(ok.code).toBe(0);
    const decoded = JSON.parse(ok.stdout) as { verified: boolean; expired: boolean; messageType: string; payload: { task: { type: string } } };
    expect(decoded).toMatchObject({ verified: true, expired: true, messageType: "p2p:task_request" });
    expect(decoded.payload.task.type).toBe("text_analysis");
    expectProtoJsonNames(decoded);
    expectProtoJsonNames((decoded as unknown as { signer: unknown }).signer, "signer");

    const sig = Buffer.from(good.envelope.signature.value, "base64");
    sig[3]! ^= 1;
    const tampered = { ...good.envelope, signature: { ...good.envelope.signature, value: sig.toString("base64") } };
    const bad = await runCli(["decode"], { input: JSON.stringify(tampered) });
    expect(bad.code).toBe(1);
    const refused = JSON.parse(bad.stdout) as Record<string, unknown>;
    expect(refused).toMatchObject({ verified: false, error: { code: "signature_invalid" }, unverifiedHeader: { messageId: expect.any(String) } });
    expectProtoJsonNames(refused);

    const wrongKey = await runCli(["decode", "--key-id", "someone-else"], { input: JSON.stringify(good.envelope) });
    expect(wrongKey.code).toBe(1);
  });
});
