"""Run webhooks: the URL check, the signature, and the once-per-run claim (issue 26 item 5)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid

import asyncpg
import pytest

from overseer import run_body, thread_queue
from overseer.errors import InvalidRequestError
from overseer.runtime.notify import signature


@pytest.mark.parametrize("url", ["ftp://x/y", "/relative", "http://", 7, "not a url"])
def test_a_webhook_must_be_an_absolute_http_url(url: object):
    with pytest.raises(InvalidRequestError) as refused:
        run_body.check_webhook(url)
    assert refused.value.details == {"field": "webhook"}


def test_http_and_https_webhooks_and_none_pass():
    for url in (None, "http://127.0.0.1:9000/hook", "https://hooks.example.org/a?b=c"):
        run_body.check_webhook(url)


def test_the_signature_is_the_bodys_hmac_sha256():
    body = b'{"run_id":"r"}'
    want = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature("s3cret", body) == f"sha256={want}"
    assert signature("other", body) != signature("s3cret", body)


async def test_an_ended_run_is_claimed_once_and_a_retried_claim_gets_it_again(
        pool: asyncpg.Pool):
    tid, wid, resume = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await pool.execute("""INSERT INTO agent_threads (thread_id, status, "values")
                          VALUES ($1, 'idle', '{"n": 1}'::jsonb)""", tid)
    for run_id, status in ((wid, "interrupted"), (resume, "running")):
        await pool.execute(
            """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id,
                                       workflow_run_id, kind, status, kwargs)
               VALUES ($1, $2, 'a', 'g', $3, 'start', $4, $5::jsonb)""",
            run_id, tid, wid, status, json.dumps({"webhook": f"http://h/{run_id}"}))
    first = await thread_queue.claim_webhooks(pool, str(wid), "pause:1")
    assert [h["delivery"] for h in first] == [str(wid)]  # the running resume is not due
    assert first[0]["payload"]["values"] == {"n": 1}
    assert first[0]["payload"]["status"] == "interrupted"
    assert "webhook_claim" not in first[0]["payload"]["kwargs"]
    assert await thread_queue.claim_webhooks(pool, str(wid), "pause:1") == first  # a retry
    await pool.execute("UPDATE agent_runs SET status = 'success' WHERE run_id = $1", resume)
    later = await thread_queue.claim_webhooks(pool, str(wid), "end")
    assert [h["delivery"] for h in later] == [str(resume)]  # the first is not sent again
