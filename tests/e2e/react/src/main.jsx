// A chat page built on the SDK's React hook, as its docs write one; only the URL and the key
// point it at Overseer. tests/e2e/test_react_usestream.py opens it in headless Chromium with
// ?apiUrl=…&apiKey=…&assistantId=…[&inputKey=…] and drives it by the element ids below.
import React, { useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("apiUrl");
const apiKey = params.get("apiKey");
const assistantId = params.get("assistantId");
// A graph whose input is not a chat: what is typed goes to this state key instead.
const inputKey = params.get("inputKey");
const STREAM_MODE = ["messages-tuple", "values", "updates"];

// What the page rendered, in order, for the test: whether a run is going, the messages' ids,
// each new text of the last AI message, each node's update, errors; with the milliseconds
// since the page loaded.
window.__seen = [];
const started = performance.now();
function note(kind, detail) {
  window.__seen.push({ kind, ...detail, at: Math.round(performance.now() - started) });
}

function textOf(message) {
  if (typeof message.content === "string") return message.content;
  if (Array.isArray(message.content)) {
    return message.content.map((part) => (typeof part === "string" ? part : part.text ?? "")).join("");
  }
  return "";
}

function Message({ message }) {
  const calls = message.type === "ai" ? message.tool_calls ?? [] : [];
  return (
    <li data-testid="message" data-type={message.type} data-id={message.id ?? ""}>
      <span className="who">{message.type}</span>
      <span data-testid="message-text">{textOf(message)}</span>
      {calls.map((call) => (
        <code key={call.id} data-testid="tool-call">{` ${call.name}(${JSON.stringify(call.args)})`}</code>
      ))}
    </li>
  );
}

function App() {
  const [threadId, setThreadId] = useState(null);
  const [runId, setRunId] = useState(null);
  const [draft, setDraft] = useState("");
  const [answer, setAnswer] = useState("");
  const stream = useStream({
    apiUrl,
    apiKey,
    assistantId,
    messagesKey: "messages",
    threadId,
    onThreadId: setThreadId,
    onCreated: (run) => setRunId(run.run_id),
    onUpdateEvent: (data) => {
      for (const node of Object.keys(data ?? {})) note("update", { node });
    },
    onError: (error) => note("error", { error: String(error?.message ?? error) }),
  });

  const messages = stream.messages;
  const lastAi = [...messages].reverse().find((m) => m.type === "ai");
  const lastAiText = lastAi ? textOf(lastAi) : "";
  const ids = messages.map((m) => `${m.type}:${m.id ?? ""}`).join(" ");
  const shown = useRef({ text: "", ids: "", loading: false });
  useEffect(() => {
    const last = shown.current;
    if (stream.isLoading !== last.loading) note("loading", { loading: stream.isLoading });
    if (ids !== last.ids) note("messages", { ids });
    if (lastAiText !== last.text) note("text", { text: lastAiText });
    shown.current = { text: lastAiText, ids, loading: stream.isLoading };
  }, [lastAiText, ids, stream.isLoading]);

  function send(event) {
    event.preventDefault();
    const content = draft.trim();
    if (!content) return;
    setDraft("");
    if (inputKey) {
      stream.submit({ [inputKey]: content }, { streamMode: STREAM_MODE });
      return;
    }
    const message = { type: "human", content, id: crypto.randomUUID() };
    stream.submit(
      { messages: [message] },
      {
        streamMode: STREAM_MODE,
        // shown at once, before the run's first values arrive
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }),
      },
    );
  }

  function resume(event) {
    event.preventDefault();
    const value = JSON.parse(answer);
    setAnswer("");
    stream.submit(undefined, { command: { resume: value }, streamMode: STREAM_MODE });
  }

  // the state's other keys, as the graph has them now
  const { messages: _messages, __interrupt__: _interrupt, ...state } = stream.values ?? {};

  return (
    <main>
      <h1>useStream → {assistantId}</h1>
      <div id="status" data-testid="status" data-loading={stream.isLoading ? "true" : "false"}>
        {stream.isLoading ? "running…" : "idle"}
        {" · thread "}<span id="thread-id" data-testid="thread-id">{threadId ?? ""}</span>
        {" · run "}<span id="run-id" data-testid="run-id">{runId ?? ""}</span>
      </div>
      <ul id="messages">
        {messages.map((message, i) => <Message key={message.id ?? i} message={message} />)}
      </ul>
      <pre id="values" data-testid="values">{JSON.stringify(state)}</pre>
      {stream.interrupt && !stream.isLoading ? (
        <section id="interrupt" data-testid="interrupt">
          <div>The graph asks:</div>
          <pre id="interrupt-value" data-testid="interrupt-value">
            {JSON.stringify(stream.interrupt.value)}
          </pre>
          <form onSubmit={resume}>
            <input id="resume-value" data-testid="resume-value" value={answer}
                   onChange={(e) => setAnswer(e.target.value)} placeholder="the answer, as JSON" />
            <button id="resume" data-testid="resume" type="submit">Resume</button>
          </form>
        </section>
      ) : null}
      {stream.error ? (
        <div id="error" data-testid="error">{String(stream.error?.message ?? stream.error)}</div>
      ) : null}
      <form onSubmit={send}>
        <input id="message-input" data-testid="message-input" value={draft}
               onChange={(e) => setDraft(e.target.value)}
               placeholder={inputKey ? `the graph's ${inputKey}` : "Type a message"} />
        <button id="send" data-testid="send" type="submit" disabled={stream.isLoading}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
