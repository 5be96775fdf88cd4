"""Schema migrations as an ordered list, each applied once and recorded (langgraph checkpoint-postgres style).

Never edit a shipped migration: append a new one. A pipeline's own tables are its own
migrations (``Pipeline.store.migrations``), applied after these (:func:`apply_migrations`).
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg

from overseer.pipelines import Pipeline
from overseer.registry import get_registry

MIGRATIONS: list[tuple[str, str]] = [
    (
        "event_log",
        """
        CREATE TABLE events (
            seq          bigserial PRIMARY KEY,
            event_id     uuid NOT NULL UNIQUE,
            run_id       uuid NOT NULL,
            type         text NOT NULL,
            data         jsonb NOT NULL DEFAULT '{}'::jsonb,
            actor        text NOT NULL,
            occurred_at  timestamptz NOT NULL DEFAULT now(),
            trace_id     text
        );
        CREATE INDEX events_run_seq ON events (run_id, seq);
        CREATE INDEX events_type ON events (type, occurred_at);
        CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'events is append-only (% refused)', TG_OP;
        END $$;
        CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON events
            FOR EACH ROW EXECUTE FUNCTION events_append_only();
        """,
    ),
    (
        "artifacts_and_page_cache",
        """
        CREATE TABLE artifacts (
            sha256        text PRIMARY KEY,
            content       bytea NOT NULL,
            size_bytes    bigint NOT NULL,
            content_type  text,
            filename      text,
            kind          text NOT NULL,
            page_count    integer NOT NULL,
            created_at    timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE page_texts (
            sha256       text NOT NULL REFERENCES artifacts (sha256),
            page_number  integer NOT NULL,
            variant      text NOT NULL,
            data         jsonb NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (sha256, page_number, variant)
        );
        """,
    ),
    (
        "read_models",
        """
        CREATE TABLE runs (
            run_id           uuid PRIMARY KEY,
            pipeline         text NOT NULL,
            workflow_id      text NOT NULL,
            status           text NOT NULL,
            parent_run_id    uuid,
            submitted_by     text,
            idempotency_key  text,
            input            jsonb NOT NULL DEFAULT '{}'::jsonb,
            result           jsonb,
            error            jsonb,
            trace_id         text,
            created_at       timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX runs_pipeline_status ON runs (pipeline, status, created_at DESC);
        CREATE INDEX runs_parent ON runs (parent_run_id);
        CREATE TABLE approvals (
            run_id           uuid PRIMARY KEY REFERENCES runs (run_id),
            pipeline         text NOT NULL,
            status           text NOT NULL,
            reason_codes     jsonb NOT NULL DEFAULT '[]'::jsonb,
            payload          jsonb NOT NULL DEFAULT '{}'::jsonb,
            requested_at     timestamptz NOT NULL,
            sla_deadline     timestamptz,
            sla_breached_at  timestamptz,
            decision         text,
            decided_by       text,
            decided_at       timestamptz,
            note             text,
            updates          jsonb
        );
        CREATE INDEX approvals_status ON approvals (status, requested_at);
        """,
    ),
    (
        "approval_assignment_and_ladder",
        """
        ALTER TABLE approvals
            ADD COLUMN assigned_to       text,
            ADD COLUMN assigned_group    text,
            ADD COLUMN claimed_at        timestamptz,
            ADD COLUMN reminded_at       timestamptz,
            ADD COLUMN escalation_level  integer NOT NULL DEFAULT 0,
            ADD COLUMN auto_action       text;
        CREATE INDEX approvals_assignee ON approvals (assigned_to) WHERE status = 'pending';
        """,
    ),
    (
        "security_events",
        """
        CREATE TABLE security_events (
            seq          bigserial PRIMARY KEY,
            occurred_at  timestamptz NOT NULL DEFAULT now(),
            code         text NOT NULL,
            status       integer NOT NULL,
            subject      text,
            method       text NOT NULL,
            path         text NOT NULL,
            client       text,
            trace_id     text
        );
        CREATE INDEX security_events_time ON security_events (occurred_at);
        CREATE TRIGGER security_events_no_update BEFORE UPDATE OR DELETE ON security_events
            FOR EACH ROW EXECUTE FUNCTION events_append_only();
        """,
    ),
    (
        "agent_server_threads",
        """
        CREATE TABLE agent_threads (
            thread_id      uuid PRIMARY KEY,
            metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
            status         text NOT NULL DEFAULT 'idle',
            graph_id       text,
            "values"       jsonb,
            state          jsonb,
            interrupts     jsonb NOT NULL DEFAULT '{}'::jsonb,
            checkpoint     jsonb,
            last_run_id    uuid,
            created_by     text,
            created_at     timestamptz NOT NULL DEFAULT now(),
            updated_at     timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX agent_threads_updated ON agent_threads (updated_at DESC);
        CREATE TABLE agent_runs (
            run_id              uuid PRIMARY KEY,
            thread_id           uuid NOT NULL REFERENCES agent_threads (thread_id) ON DELETE CASCADE,
            assistant_id        text NOT NULL,
            graph_id            text NOT NULL,
            workflow_run_id     uuid NOT NULL,
            from_offset         integer NOT NULL DEFAULT 0,
            kind                text NOT NULL,
            status              text NOT NULL,
            metadata            jsonb NOT NULL DEFAULT '{}'::jsonb,
            kwargs              jsonb NOT NULL DEFAULT '{}'::jsonb,
            multitask_strategy  text NOT NULL DEFAULT 'reject',
            created_by          text,
            created_at          timestamptz NOT NULL DEFAULT now(),
            updated_at          timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX agent_runs_thread ON agent_runs (thread_id, created_at DESC);
        CREATE TABLE agent_checkpoints (
            thread_id             uuid NOT NULL REFERENCES agent_threads (thread_id) ON DELETE CASCADE,
            checkpoint_id         text NOT NULL,
            parent_checkpoint_id  text,
            state                 jsonb NOT NULL,
            created_at            timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (thread_id, checkpoint_id)
        );
        CREATE INDEX agent_checkpoints_time ON agent_checkpoints (thread_id, created_at DESC);
        """,
    ),
    (
        # a submitter's thread search filters by owner in SQL, newest first
        "agent_threads_owner",
        """
        CREATE INDEX agent_threads_owner ON agent_threads (created_by, updated_at DESC);
        """,
    ),
    (
        # a run's workflow hands its thread on at its end unless the API is
        # cancelling that run (the canceller then owns the thread's state and queue)
        "agent_threads_cancelling",
        """
        ALTER TABLE agent_threads ADD COLUMN cancelling uuid;
        """,
    ),
    (
        # chat-model tokens of runs as segments, written as they come
        # (overseer/token_stream.py); seq orders a run's rows, stream_base places them
        "agent_run_tokens",
        """
        CREATE TABLE agent_run_tokens (
            seq              bigserial PRIMARY KEY,
            workflow_run_id  uuid NOT NULL,
            stream_base      integer NOT NULL,
            data             jsonb NOT NULL,
            created_at       timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX agent_run_tokens_run ON agent_run_tokens (workflow_run_id, seq);
        """,
    ),
    (
        # every hand-off reads and claims a workflow's runs by workflow_run_id
        # (save_snapshot, claim_webhooks): an index, not a scan that grows with history
        "agent_runs_workflow_run",
        """
        CREATE INDEX agent_runs_workflow_run ON agent_runs (workflow_run_id);
        """,
    ),
    (
        # Agent Server crons, each run by a Temporal Schedule (overseer.crons)
        "agent_crons",
        """
        CREATE TABLE agent_crons (
            cron_id uuid PRIMARY KEY,
            assistant_id text NOT NULL,
            graph_id text NOT NULL,
            thread_id uuid,
            schedule text NOT NULL,
            timezone text,
            end_time timestamptz,
            enabled boolean NOT NULL DEFAULT true,
            on_run_completed text,
            payload jsonb NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX agent_crons_owner ON agent_crons (created_by, created_at);
        CREATE INDEX agent_crons_thread ON agent_crons (thread_id);
        """,
    ),
    (
        # assistants made through the Agent Server API, with versions
        # (overseer.assistants); a registered graph is an assistant without a row
        "agent_assistants",
        """
        CREATE TABLE agent_assistants (
            assistant_id uuid PRIMARY KEY,
            graph_id text NOT NULL,
            name text NOT NULL,
            description text,
            config jsonb NOT NULL DEFAULT '{}'::jsonb,
            context jsonb NOT NULL DEFAULT '{}'::jsonb,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            version integer NOT NULL,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE agent_assistant_versions (
            assistant_id uuid NOT NULL REFERENCES agent_assistants (assistant_id)
                ON DELETE CASCADE,
            version integer NOT NULL,
            graph_id text NOT NULL,
            name text NOT NULL,
            description text,
            config jsonb NOT NULL,
            context jsonb NOT NULL,
            metadata jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (assistant_id, version)
        );
        """,
    ),
    (
        # a segment's values/updates chunks go live as these rows too; json (not
        # jsonb) keeps each object's keys in the order LangGraph gave them
        "agent_run_tokens_json",
        """
        ALTER TABLE agent_run_tokens ALTER COLUMN data TYPE json USING data::json;
        """,
    ),
    (
        # every thread's history is LangGraph's own checkpoints; the copies kept
        # for graphs that ran node by node go with that runtime
        "drop_agent_checkpoints",
        """
        DROP TABLE IF EXISTS agent_checkpoints;
        """,
    ),
    (
        "approval_per_interrupt",
        # Each pending interrupt of a run is its own approval: one row per
        # approval key (``<round>:<interrupt id>``, ``budget:<n>``); rows written before
        # keep the empty key (one row per run, as then).
        """
        ALTER TABLE approvals
            ADD COLUMN approval_key  text NOT NULL DEFAULT '',
            ADD COLUMN interrupt_id  text;
        ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;
        ALTER TABLE approvals ADD PRIMARY KEY (run_id, approval_key);
        CREATE INDEX approvals_run_interrupt ON approvals (run_id, interrupt_id);
        """,
    ),
    (
        # a pause's checkpoint, held back until a client reads the thread
        # (overseer.thread_sync.write_snapshot's ``shown``), so that read needs no workflow
        "agent_threads_paused_checkpoint",
        """
        ALTER TABLE agent_threads ADD COLUMN paused_checkpoint jsonb;
        """,
    ),
    (
        # a thread's time-to-live (overseer.thread_ttl): minutes after the later of its
        # last change and ttl_from, then ttl_strategy (delete | keep_latest)
        "agent_threads_ttl",
        """
        ALTER TABLE agent_threads
            ADD COLUMN ttl_minutes  double precision,
            ADD COLUMN ttl_strategy text,
            ADD COLUMN ttl_from     timestamptz;
        """,
    ),
    (
        # a run segment's attempts (overseer.fencing): the newest claim holds the segment,
        # and an attempt it replaced writes nothing more
        "segment_fences",
        """
        CREATE TABLE segment_fences (
            run_id     text NOT NULL,
            segment    text NOT NULL,
            holder     text NOT NULL,
            attempt    integer NOT NULL,
            claimed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, segment)
        );
        """,
    ),
]


async def apply_migrations(conn: asyncpg.Connection,
                           pipelines: Iterable[Pipeline] | None = None) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction.

    Overseer's own first (``schema_migrations``), then each pipeline's
    (``Pipeline.store.migrations``, recorded per pipeline in ``pipeline_migrations``).
    Concurrent callers (API and worker starting together) serialise on an advisory lock,
    so each migration runs exactly once.

    Args:
        conn: an open connection with DDL rights.
        pipelines: whose migrations to apply (default: every registered pipeline).

    Returns:
        Names of the migrations applied by this call (empty when up to date); a
        pipeline's as ``<pipeline>:<name>``.
    """
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock(727274)")
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, (name, sql) in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(name)
        applied += await _pipeline_migrations(conn, pipelines)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(727274)")
    return applied


async def _pipeline_migrations(conn: asyncpg.Connection,
                               pipelines: Iterable[Pipeline] | None) -> list[str]:
    """Each pipeline's own migrations not yet recorded, in order (the caller holds the lock)."""
    if pipelines is None:
        pipelines = get_registry()
    await conn.execute(
        """CREATE TABLE IF NOT EXISTS pipeline_migrations (
               pipeline text NOT NULL,
               name text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now(),
               PRIMARY KEY (pipeline, name))""")
    applied: list[str] = []
    for pipeline in pipelines:
        if not pipeline.store.migrations:
            continue
        done = {r["name"] for r in await conn.fetch(
            "SELECT name FROM pipeline_migrations WHERE pipeline = $1", pipeline.name)}
        for name, sql in pipeline.store.migrations:
            if name in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO pipeline_migrations (pipeline, name) "
                                   "VALUES ($1, $2)", pipeline.name, name)
            applied.append(f"{pipeline.name}:{name}")
    return applied
