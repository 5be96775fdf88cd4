// The real `useStream` hook of @langchain/react (1.1.0) against Overseer's thread protocol
// (POST /threads/{id}/commands and /threads/{id}/stream/events), rendered in Node with
// react-test-renderer.
//
// Run by tests/e2e/test_agent_protocol.py with OVERSEER_URL and OVERSEER_KEY set; prints one
// JSON object on its last line, scenario by scenario, that the Python test checks (the
// assertions live there). The hook is used as an app uses it: only the URL, the key and the
// graph's name are given.
import React from "react";
import TestRenderer from "react-test-renderer";
import { useMessages, useStream } from "@langchain/react";

globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const apiUrl = process.env.OVERSEER_URL;
const apiKey = process.env.OVERSEER_KEY;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const out = {};

// chatty's model (langchain-core's fake) streams its whole reply at once, so its tokens reach
// the hook in one read and React renders them together. While `paceMs` is set, each SSE frame
// of the event streams is handed to the hook on its own, `paceMs` apart, as tokens of a real
// model arrive: the bytes are the server's, only their timing is spread.
let paceMs = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const response = await realFetch(input, init);
  const accept = new Headers(init?.headers ?? {}).get("accept") ?? "";
  if (!paceMs || !accept.includes("text/event-stream") || !response.body) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffer = "";
  const paced = new ReadableStream({
    async pull(controller) {
      for (;;) {
        const cut = buffer.indexOf("\n\n");
        if (cut >= 0) {
          const frame = buffer.slice(0, cut + 2);
          buffer = buffer.slice(cut + 2);
          await sleep(paceMs);
          controller.enqueue(encoder.encode(frame));
          return;
        }
        const { value, done } = await reader.read();
        if (done) {
          if (buffer) controller.enqueue(encoder.encode(buffer));
          controller.close();
          return;
        }
        buffer += decoder.decode(value, { stream: true });
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(paced, { status: response.status, statusText: response.statusText, headers: response.headers });
};

function textOf(message) {
  if (typeof message.text === "string") return message.text;
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

// Mount a component on the hook; every render is recorded as the UI would show it.
function mount(assistantId) {
  const seen = { stream: null, renders: [], threadId: null, started: Date.now() };
  function App() {
    const stream = useStream({
      assistantId,
      apiUrl,
      apiKey,
      threadId: null,
      onThreadId: (id) => {
        seen.threadId = id;
      },
    });
    seen.stream = stream;
    seen.renders.push({
      at: Date.now() - seen.started,
      loading: stream.isLoading,
      messages: stream.messages.map((m) => ({ type: m.type ?? m._getType?.(), id: m.id, text: textOf(m) })),
      interrupt: stream.interrupt ? { id: stream.interrupt.id, value: stream.interrupt.value } : null,
      values: stream.values,
      error: stream.error ? String(stream.error.message ?? stream.error) : null,
    });
    return null;
  }
  seen.renderer = TestRenderer.create(React.createElement(App));
  return seen;
}

async function until(seen, done, ms = 60000) {
  const deadline = Date.now() + ms;
  while (!done(seen.renders[seen.renders.length - 1])) {
    if (Date.now() > deadline) throw new Error(`timed out; last render ${JSON.stringify(seen.renders.at(-1))}`);
    await sleep(20);
  }
  return seen.renders[seen.renders.length - 1];
}

async function scenario(name, body) {
  try {
    out[name] = await body();
  } catch (err) {
    out[name] = { error: String(err && err.stack ? err.stack : err) };
  }
}

await scenario("chat", async () => {
  paceMs = 15;
  const seen = mount("chatty");
  await sleep(50);
  await seen.stream.submit({ messages: [{ type: "human", content: "hi" }] });
  const last = await until(seen, (r) => !r.loading && r.messages.some((m) => m.text === "signed"));
  await sleep(300);
  seen.renderer.unmount();
  paceMs = 0;
  // the reply as each render showed it while the run went on, in order, without repeats
  const shown = [];
  for (const r of seen.renders.filter((r) => r.loading)) {
    const ai = r.messages.filter((m) => m.type === "ai");
    const text = ai.length && ai[0].text !== "signed" ? ai[0].text : "";
    if (text && text !== shown.at(-1)) shown.push(text);
  }
  return {
    thread_id: seen.threadId,
    partials: shown,
    signed_while_loading: seen.renders.some((r) => r.loading && r.messages.some((m) => m.text === "signed")),
    whole_reply_before_values: seen.renders.some(
      (r) => r.loading && r.messages.some((m) => m.text === shown.at(-1)) && !r.messages.some((m) => m.text === "signed"),
    ),
    final: last.messages,
    loading_after: seen.renders.at(-1).loading,
    error: seen.renders.at(-1).error,
  };
});

await scenario("interrupt", async () => {
  const seen = mount("publish_review");
  await sleep(50);
  await seen.stream.submit({ topic: "durable agents" });
  const paused = await until(seen, (r) => r.interrupt !== null && !r.loading);
  await seen.stream.respond({ publish: true, note: "ship it" });
  const done = await until(seen, (r) => !r.loading && r.values.published === true);
  await sleep(300);
  seen.renderer.unmount();
  return {
    thread_id: seen.threadId,
    interrupt: paused.interrupt,
    values: done.values,
    interrupt_after: seen.renders.at(-1).interrupt,
    loading_after: seen.renders.at(-1).loading,
    error: seen.renders.at(-1).error,
  };
});

// A subgraph's or a subagent's view as an app writes one: `stream.subgraphs` /
// `stream.subagents` (discovered from the events at their namespaces), and a card per entry
// showing its own messages with `useMessages(stream, entry)` (mounting the card subscribes
// to that namespace). The frames come as the server sends them: the hook opens the card's
// subscription on a new connection that replays the run, so a card mounted after its
// message began gets the live tokens before that replay's message-start (the hook does not
// reorder them); the graphs' models start streaming half a second after the call, as real
// models do, and the server sends a subgraph's state at once, so the card mounts first.
async function scopedView(assistantId, kind, content) {
  const seen = { stream: null, renders: [], cards: {}, threadId: null };
  function Card({ stream, entry }) {
    const messages = useMessages(stream, entry);
    seen.cards[entry.id] = messages.map((m) => ({ type: m.type ?? m._getType?.(), text: textOf(m) }));
    return null;
  }
  function App() {
    const stream = useStream({ assistantId, apiUrl, apiKey, threadId: null,
                               onThreadId: (id) => { seen.threadId = id; } });
    seen.stream = stream;
    const entries = [...stream[kind].values()];
    seen.renders.push({
      loading: stream.isLoading,
      entries: entries.map((g) => ({ id: g.id, namespace: g.namespace, node: g.nodeName, name: g.name,
                                     task: g.taskInput, status: g.status })),
      messages: stream.messages.map((m) => ({ type: m.type ?? m._getType?.(), text: textOf(m) })),
    });
    return React.createElement(React.Fragment, null,
      ...entries.map((g) => React.createElement(Card, { key: g.id, stream, entry: g })));
  }
  const renderer = TestRenderer.create(React.createElement(App));
  try {
    await sleep(50);
    await seen.stream.submit({ messages: [{ type: "human", content }] });
    const deadline = Date.now() + 60000;
    const last = () => seen.renders.at(-1);
    // done once the run ended and a card shows an answer the root's messages also hold
    // (the card's own subscription may still be replaying when the run ends)
    const caughtUp = () => Object.values(seen.cards).some((card) => card.some(
      (m) => m.type === "ai" && m.text && last().messages.some((r) => r.text === m.text)));
    while (last().loading || !last().entries.length || !caughtUp()) {
      if (Date.now() > deadline) throw new Error(`timed out; cards ${JSON.stringify(seen.cards)} last render ${JSON.stringify(last())}`);
      await sleep(20);
    }
    await sleep(300);
    return { thread_id: seen.threadId, entries: last().entries, cards: seen.cards,
             messages: last().messages, loading_after: last().loading };
  } finally {
    renderer.unmount();
  }
}

await scenario("subgraph_view", () => scopedView("research_desk", "subgraphs", "dig"));
await scenario("subagent_view", () => scopedView("deep_desk", "subagents", "go"));

console.log(JSON.stringify(out));
process.exit(0);
