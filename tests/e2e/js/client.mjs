// The official JavaScript client (@langchain/langgraph-sdk) against Overseer's Agent Server API.
//
// Run by tests/e2e/test_js_client.py with OVERSEER_URL and OVERSEER_KEY set; prints one JSON
// object, scenario by scenario, that the Python test checks (the assertions live there).
// Only the URL and the key differ from a script written for LangGraph's Agent Server.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.OVERSEER_URL, apiKey: process.env.OVERSEER_KEY });
const out = {};

async function scenario(name, body) {
  try {
    out[name] = await body();
  } catch (err) {
    out[name] = { error: String(err && err.message ? err.message : err) };
  }
}

await scenario("info", async () => {
  const assistants = await client.assistants.search({ limit: 100 });
  return { graphs: assistants.map((a) => a.graph_id) };
});

await scenario("interrupt_and_resume", async () => {
  const thread = await client.threads.create();
  const paused = await client.runs.wait(thread.thread_id, "approvals", { input: { topic: "launch" } });
  await client.runs.wait(thread.thread_id, "approvals", { command: { resume: { decision: "yes" } } });
  const done = await client.runs.wait(thread.thread_id, "approvals", {
    command: { resume: { decision: "sure" } },
  });
  const state = await client.threads.getState(thread.thread_id);
  const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  return {
    question: paused.__interrupt__[0].value.question,
    summary: done.summary,
    status: (await client.threads.get(thread.thread_id)).status,
    next: state.next,
    history: history.length,
  };
});

await scenario("tokens", async () => {
  const thread = await client.threads.create();
  const started = Date.now();
  const chunks = [];
  let ended = null;
  for await (const part of client.runs.stream(thread.thread_id, "chatty", {
    input: { messages: [{ type: "human", content: "hi" }] },
    streamMode: ["messages-tuple", "updates"],
  })) {
    if (part.event === "messages") {
      const [message, metadata] = part.data;
      chunks.push({ at: Date.now() - started, content: message.content, node: metadata.langgraph_node });
    }
    if (part.event === "updates" && part.data.talk && ended === null) ended = Date.now() - started;
  }
  return { chunks, talk_update_at: ended };
});

await scenario("custom_and_subgraphs", async () => {
  const custom = [];
  for await (const part of client.runs.stream(null, "progress", {
    input: { job: "js" },
    streamMode: "custom",
  })) {
    if (part.event === "custom") custom.push(part.data.step);
  }
  const events = [];
  for await (const part of client.runs.stream(null, "seg_constructs", {
    input: { topic: "a b" },
    streamMode: "updates",
    streamSubgraphs: true,
  })) {
    events.push(part.event);
  }
  return { custom, subgraph_events: events.filter((e) => e.includes("|")).map((e) => e.split(":")[0]) };
});

await scenario("config_context_breakpoints", async () => {
  const greeted = await client.runs.wait(null, "greeter", {
    input: {},
    config: { configurable: { language: "es" }, tags: ["user:js"] },
    context: { name: "Js" },
  });
  const thread = await client.threads.create();
  const stopped = await client.runs.wait(thread.thread_id, "greeter", {
    input: {},
    context: {},
    interruptBefore: ["middle"],
  });
  const paused = await client.threads.get(thread.thread_id);
  const rest = await client.runs.wait(thread.thread_id, "greeter", { input: null });
  return { greeted: greeted.lines[0], stopped: stopped.lines, paused: paused.status, rest: rest.lines };
});

await scenario("parallel_resume_map", async () => {
  const thread = await client.threads.create();
  const paused = await client.runs.wait(thread.thread_id, "parallel_approvals", { input: { topic: "x y" } });
  const resume = Object.fromEntries(
    paused.__interrupt__.map((i) => [i.id, { decision: `js-${i.value.item}` }]),
  );
  const done = await client.runs.wait(thread.thread_id, "parallel_approvals", { command: { resume } });
  // one at a time, the newer id first: each interrupt is its own approval
  const other = await client.threads.create();
  const two = await client.runs.wait(other.thread_id, "parallel_approvals", { input: { topic: "p q" } });
  const [older, newer] = two.__interrupt__.map((i) => i.id).sort();
  const item = Object.fromEntries(two.__interrupt__.map((i) => [i.id, i.value.item]));
  const left = await client.runs.wait(other.thread_id, "parallel_approvals", {
    command: { resume: { [newer]: { decision: "first" } } },
  });
  const last = await client.runs.wait(other.thread_id, "parallel_approvals", {
    command: { resume: { [older]: { decision: "second" } } },
  });
  return {
    pending: paused.__interrupt__.length, summary: done.summary,
    left: left.__interrupt__.map((i) => i.id === older), one_by_one: last.summary,
    expected: [`${item[newer]}=first:`, `${item[older]}=second:`].sort().join(","),
  };
});

await scenario("events_mode", async () => {
  const kinds = [];
  let tokens = "";
  for await (const part of client.runs.stream(null, "chatty", {
    input: { messages: [{ type: "human", content: "tell me" }] },
    streamMode: ["events"],
  })) {
    if (part.event !== "events") continue;
    kinds.push(part.data.event);
    if (part.data.event === "on_chat_model_stream") tokens += part.data.data.chunk.content;
  }
  return { first: kinds[0], last: kinds[kinds.length - 1], tokens,
           chat_model: kinds.includes("on_chat_model_start") };
});

await scenario("store", async () => {
  await client.store.putItem(["alice", "js"], "tea", { text: "green tea with jasmine" });
  await client.store.putItem(["alice", "js"], "tax", { text: "the annual tax return" });
  const item = await client.store.getItem(["alice", "js"], "tea");
  const found = await client.store.searchItems(["alice", "js"], { query: "a hot drink" });
  const spaces = await client.store.listNamespaces({ prefix: ["alice"] });
  await client.store.deleteItem(["alice", "js"], "tea");
  const gone = await client.store.getItem(["alice", "js"], "tea");
  return { value: item.value, first: found.items[0].key, spaces: spaces.namespaces, gone };
});

await scenario("crons", async () => {
  const cron = await client.crons.create("greeter", { schedule: "0 9 * * 1", input: {} });
  const listed = await client.crons.search({ assistantId: "greeter", limit: 100 });
  const count = await client.crons.count({ assistantId: "greeter" });
  await client.crons.delete(cron.cron_id);
  const after = await client.crons.search({ assistantId: "greeter", limit: 100 });
  return {
    schedule: cron.schedule,
    next_run_date: cron.next_run_date,
    listed: listed.some((c) => c.cron_id === cron.cron_id),
    count,
    deleted: !after.some((c) => c.cron_id === cron.cron_id),
  };
});

await scenario("assistants", async () => {
  const made = await client.assistants.create({
    graphId: "greeter",
    config: { configurable: { language: "nl" } },
    context: { name: "Anke" },
    name: "Dutch greeter",
  });
  const greeted = await client.runs.wait(null, made.assistant_id, { input: {} });
  const updated = await client.assistants.update(made.assistant_id, { context: { name: "Bram" } });
  const again = await client.runs.wait(null, made.assistant_id, { input: {} });
  const versions = await client.assistants.getVersions(made.assistant_id);
  await client.assistants.delete(made.assistant_id);
  return {
    greeted: greeted.lines[0],
    version: updated.version,
    again: again.lines[0],
    versions: versions.map((v) => v.version),
  };
});

await scenario("thread_stream", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "greeter", { input: {}, context: { name: "T" } });
  const events = [];
  const controller = new AbortController();
  for await (const part of client.threads.joinStream(thread.thread_id, { signal: controller.signal })) {
    events.push(part.event);
    if (part.event === "metadata" && part.data.status === "run_done") {
      controller.abort();
      return { events, run_done: part.data.run_id === run.run_id };
    }
  }
  return { events, run_done: false };
});

await scenario("subgraph_state_time_travel", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "nested_review", { input: { topic: "tides" } });
  const flat = await client.threads.getState(thread.thread_id);
  const nested = await client.threads.getState(thread.thread_id, undefined, { subgraphs: true });
  const inner = await client.threads.getState(thread.thread_id, flat.tasks[0].checkpoint);
  const picked = await client.threads.getState(thread.thread_id, undefined, {
    select: ["values.draft", "next"],
  });
  const counter = await client.threads.create();
  await client.runs.wait(counter.thread_id, "counter", { input: { count: 0 } });
  const history = await client.threads.getHistory(counter.thread_id, { limit: 100 });
  const past = history.find((h) => h.values.count === 5);
  await client.threads.updateState(counter.thread_id, {
    values: { count: 9 }, checkpointId: past.checkpoint.checkpoint_id,
  });
  const done = await client.runs.wait(counter.thread_id, "counter", { input: null });
  return {
    task_ns: flat.tasks[0].checkpoint.checkpoint_ns.split(":")[0],
    nested_next: nested.tasks[0].state.next,
    inner_values: inner.values,
    picked,
    seen_tail: done.seen.slice(-4),
  };
});

process.stdout.write(JSON.stringify(out));
