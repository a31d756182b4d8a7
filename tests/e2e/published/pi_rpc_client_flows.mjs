// pi 0.73.1's own RpcClient (from the installed npm package, unchanged) drives `pisces --mode rpc` through the
// flows of pi-mono's test/rpc.test.ts and of pi's docs/rpc.md, plus the newer pi commands through the client's
// own send(). Configuration comes from the environment (see tests/e2e/test_published_pi_rpc_client.py).
// Prints one JSON line per flow ({"flow", "ok", "error"?}) and exits 1 when any flow failed.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const { RpcClient } = await import(pathToFileURL(process.env.PI_RPC_CLIENT).href);
const SHIM = process.env.PISCES_SHIM;
const CWD = process.env.WORK_CWD;
const MODELS = process.env.MODELS_JSON;
const only = process.env.FLOWS ? process.env.FLOWS.split(",") : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function sessionEntries(sessionDir) {
  const sessionsPath = join(sessionDir, "sessions");
  assert.ok(existsSync(sessionsPath), "no sessions directory under PI_CODING_AGENT_DIR");
  const dirs = readdirSync(sessionsPath);
  const cwdDir = join(sessionsPath, dirs[0]);
  const files = readdirSync(cwdDir).filter((f) => f.endsWith(".jsonl"));
  assert.equal(files.length, 1);
  return readFileSync(join(cwdDir, files[0]), "utf8").trim().split("\n").map((l) => JSON.parse(l));
}

const flows = {
  // ---- pi-mono test/rpc.test.ts, flow by flow --------------------------------------------------------
  async "should get state"(c) {
    const state = await c.getState();
    assert.equal(state.model?.provider, "anthropic");
    assert.equal(state.model?.id, "claude-sonnet-4-5");
    assert.equal(state.isStreaming, false);
    assert.equal(state.messageCount, 0);
  },
  async "should save messages to session file"(c, dir) {
    const events = await c.promptAndWait("Reply with just the word 'hello'");
    assert.ok(events.filter((e) => e.type === "message_end").length >= 2);
    await sleep(200);
    const entries = sessionEntries(dir);
    assert.equal(entries[0].type, "session");
    const roles = entries.filter((e) => e.type === "message").map((m) => m.message.role);
    assert.ok(roles.includes("user") && roles.includes("assistant"));
  },
  async "should handle manual compaction"(c, dir) {
    await c.promptAndWait("Say hello");
    const result = await c.compact();
    assert.ok(result.summary !== undefined);
    assert.ok(result.tokensBefore > 0);
    await sleep(200);
    const compactions = sessionEntries(dir).filter((e) => e.type === "compaction");
    assert.equal(compactions.length, 1);
    assert.ok(compactions[0].summary !== undefined);
  },
  async "should execute bash command"(c) {
    const result = await c.bash("echo hello");
    assert.equal(result.output.trim(), "hello");
    assert.equal(result.exitCode, 0);
    assert.equal(result.cancelled, false);
  },
  async "should add bash output to context"(c, dir) {
    await c.promptAndWait("Say hi");
    const uniqueValue = `test-${Date.now()}`;
    await c.bash(`echo ${uniqueValue}`);
    await sleep(200);
    const bash = sessionEntries(dir).filter((e) => e.type === "message" && e.message?.role === "bashExecution");
    assert.equal(bash.length, 1);
    assert.ok(bash[0].message.output.includes(uniqueValue));
  },
  async "should include bash output in LLM context"(c) {
    const uniqueValue = `unique-${Date.now()}`;
    await c.bash(`echo ${uniqueValue}`);
    const events = await c.promptAndWait(
      "What was the exact output of the echo command I just ran? Reply with just the value, nothing else.");
    const end = events.find((e) => e.type === "message_end" && e.message?.role === "assistant");
    assert.ok(end);
    assert.ok(end.message.content.find((b) => b.type === "text")?.text.includes(uniqueValue));
  },
  async "should set and get thinking level"(c) {
    await c.setThinkingLevel("high");
    assert.equal((await c.getState()).thinkingLevel, "high");
  },
  async "should cycle thinking level"(c) {
    const initial = (await c.getState()).thinkingLevel;
    const result = await c.cycleThinkingLevel();
    assert.ok(result);
    assert.notEqual(result.level, initial);
    assert.equal((await c.getState()).thinkingLevel, result.level);
  },
  async "should get available models"(c) {
    const models = await c.getAvailableModels();
    assert.ok(models.length > 0);
    for (const m of models) {
      assert.ok(m.provider !== undefined && m.id !== undefined);
      assert.ok(m.contextWindow > 0);
      assert.equal(typeof m.reasoning, "boolean");
    }
  },
  async "should get session stats"(c) {
    await c.promptAndWait("Hello");
    const stats = await c.getSessionStats();
    assert.ok(stats.sessionFile !== undefined && stats.sessionId !== undefined);
    assert.ok(stats.userMessages >= 1 && stats.assistantMessages >= 1);
  },
  async "should create new session"(c) {
    await c.promptAndWait("Hello");
    assert.ok((await c.getState()).messageCount > 0);
    await c.newSession();
    assert.equal((await c.getState()).messageCount, 0);
  },
  async "should export to HTML"(c) {
    await c.promptAndWait("Hello");
    const result = await c.exportHtml();
    assert.ok(result.path.endsWith(".html"));
    assert.ok(existsSync(join(CWD, result.path)) || existsSync(result.path));
  },
  async "should get last assistant text"(c) {
    assert.equal(await c.getLastAssistantText(), undefined);
    await c.promptAndWait("Reply with just: test123");
    assert.ok((await c.getLastAssistantText()).includes("test123"));
  },
  async "should set and get session name"(c, dir) {
    assert.equal((await c.getState()).sessionName, undefined);
    await c.promptAndWait("Reply with just 'ok'");
    await c.setSessionName("my-test-session");
    assert.equal((await c.getState()).sessionName, "my-test-session");
    await sleep(200);
    const info = sessionEntries(dir).filter((e) => e.type === "session_info");
    assert.equal(info.length, 1);
    assert.equal(info[0].name, "my-test-session");
  },
  // ---- the client's other methods, as docs/rpc.md describes them --------------------------------------
  async "docs: streaming text deltas, partial on every update"(c) {
    const deltas = [];
    const unsubscribe = c.onEvent((e) => {
      if (e.type === "message_update") {
        assert.equal(typeof e.assistantMessageEvent.partial, "object");
        if (e.assistantMessageEvent.type === "text_delta") deltas.push(e.assistantMessageEvent.delta);
      }
    });
    await c.promptAndWait("Reply with just: streamed words here");
    unsubscribe();
    assert.equal(deltas.join(""), "streamed words here");
  },
  async "docs: steer, follow up, abort"(c) {
    await c.prompt("Write slowly");
    await new Promise((resolve) => { const u = c.onEvent((e) => { if (e.type === "message_update") { u(); resolve(); } }); });
    await c.steer("Stop and say steered");
    await c.followUp("Then say followed");
    await c.abort();
    const messages = await c.getMessages();
    assert.ok(messages.some((m) => m.role === "assistant" && m.stopReason === "aborted"));
    assert.equal((await c.getState()).isStreaming, false);
  },
  async "docs: fork, clone, switch session, commands, model, modes"(c) {
    await c.promptAndWait("first question");
    await c.promptAndWait("second question");
    const forks = await c.getForkMessages();
    assert.deepEqual(forks.map((m) => m.text), ["first question", "second question"]);
    const original = (await c.getState()).sessionFile;
    const fork = await c.fork(forks[1].entryId);
    assert.deepEqual(fork, { text: "second question", cancelled: false });
    assert.notEqual((await c.getState()).sessionFile, original);
    assert.deepEqual(await c.switchSession(original), { cancelled: false });
    assert.equal((await c.getState()).sessionFile, original);
    assert.deepEqual(await c.clone(), { cancelled: false });
    assert.ok(Array.isArray(await c.getCommands()));
    const model = await c.setModel("anthropic", "claude-haiku-4-5");
    assert.equal(model.id, "claude-haiku-4-5");
    await c.setSteeringMode("one-at-a-time");
    await c.setFollowUpMode("all");
    await c.setAutoCompaction(false);
    await c.setAutoRetry(true);
    await c.abortRetry();
    await c.abortBash();
    const state = await c.getState();
    assert.equal(state.followUpMode, "all");
    assert.equal(state.autoCompactionEnabled, false);
  },
  // ---- newer pi commands, through the client's own send() and getData() -------------------------------
  async "newer pi: thinking levels, tree, entries, labels"(c) {
    const levels = c.getData(await c.send({ type: "get_available_thinking_levels" })).levels;
    assert.ok(levels.includes("off") && levels.includes("high"));
    await c.promptAndWait("tree question");
    const entries = c.getData(await c.send({ type: "get_entries" }));
    assert.equal(entries.leafId, entries.entries.at(-1).id);
    const user = entries.entries.find((e) => e.type === "message" && e.message.role === "user");
    c.getData(await c.send({ type: "set_label", entryId: user.id, label: "start" }));
    const tree = c.getData(await c.send({ type: "get_tree", includeContent: true }));
    const flat = [];
    const walk = (nodes) => nodes.forEach((n) => { flat.push(n); walk(n.children); });
    walk(tree.tree);
    const node = flat.find((n) => n.id === user.id);
    assert.equal(node.label, "start");
    assert.equal(node.content, "tree question");
    const forks = await c.getForkMessages();
    assert.ok(!Number.isNaN(Date.parse(forks[0].timestamp)));
    const since = c.getData(await c.send({ type: "get_entries", since: user.id }));
    assert.ok(since.entries.length >= 1 && since.entries.every((e) => e.id !== user.id));
  },
};

let failed = 0;
for (const [name, flow] of Object.entries(flows)) {
  if (only && !only.includes(name)) continue;
  const sessionDir = mkdtempSync(join(tmpdir(), "pi-rpc-client-"));
  writeFileSync(join(sessionDir, "models.json"), MODELS);
  const client = new RpcClient({
    cliPath: SHIM, cwd: CWD, env: { PI_CODING_AGENT_DIR: sessionDir }, provider: "anthropic",
    model: "claude-sonnet-4-5",
  });
  try {
    await client.start();
    await flow(client, sessionDir);
    console.log(JSON.stringify({ flow: name, ok: true }));
  } catch (err) {
    failed++;
    console.log(JSON.stringify({ flow: name, ok: false, error: String(err?.stack ?? err), stderr: client.getStderr() }));
  } finally {
    await client.stop();
    rmSync(sessionDir, { recursive: true, force: true });
  }
}
process.exit(failed ? 1 : 0);
