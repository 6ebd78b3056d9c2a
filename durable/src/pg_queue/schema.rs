//! The schema of a PostgreSQL queue and its versioned migrations, and the
//! text of every statement the queue runs.
//!
//! Everything lives in one schema the user chooses (`delayq` by default):
//! one `jobs` table for every named queue of that schema (the queue's name
//! is the first column of each key), a sequence for ids, the uniqueness
//! keys and the schedules (version 2), and the functions
//! that make each state change one statement and one round trip (as the
//! Redis backend's Lua scripts do). Times are microseconds since the Unix
//! epoch by the server's clock (`clock_timestamp()`).
//!
//! `delayq_schema` holds the version applied. Opening a queue takes a
//! transaction-scoped advisory lock, reads the version and applies the
//! migrations after it, in that one transaction: concurrent openers wait for
//! each other, and a half-applied migration is never seen. A schema of a
//! newer version is refused (this version does not know its layout).

/// The schema version this version of the crate writes and reads.
pub(crate) const VERSION: i32 = 2;

/// The migrations, by version: `migrations()[0]` takes an empty schema to
/// version 1, `migrations()[1]` version 1 to 2. `{s}` stands for the quoted
/// schema name, `{lit}` for it as a string literal. A migration once
/// released is never edited: a database at its version has applied it.
fn migrations() -> [&'static str; 2] {
    [V1, V2]
}

/// Version 1: the jobs, their functions, the dashboard's tables.
const V1: &str = r#"
CREATE SEQUENCE {s}.job_ids;

-- state: 0 pending, 1 leased, 2 dead. due_us: when a pending job is due,
-- when a leased job's lease ends, when a dead job died. deadline_us: the
-- deadline a job reports (sent with, or nacked or requeued to).
-- last_attempt: the attempt after which a failure is death.
CREATE TABLE {s}.jobs (
    queue text NOT NULL,
    id bigint NOT NULL,
    state smallint NOT NULL,
    due_us bigint NOT NULL,
    deadline_us bigint NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    last_attempt integer NOT NULL,
    token bigint NOT NULL DEFAULT 0,
    kind text NOT NULL DEFAULT '',
    last_error text,
    payload bytea NOT NULL,
    PRIMARY KEY (queue, id)
);

-- What reserve reads: due first, then by id, pending and leased alike
-- (a lease that ran out is due at its end).
CREATE INDEX jobs_due ON {s}.jobs (queue, due_us, id) WHERE state < 2;
-- Listings, counts and the dead set, by state.
CREATE INDEX jobs_state ON {s}.jobs (queue, state, id);

CREATE FUNCTION {s}.now_us() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
$$;

-- Jobs processed (acked) and failed (an attempt nacked, killed or whose
-- lease ran out) per minute and kind, for the dashboard; kept 24 hours. In
-- 16 shards (by server process) so that concurrent acks rarely wait for
-- each other's row.
CREATE TABLE {s}.throughput (
    queue text NOT NULL,
    minute bigint NOT NULL,
    kind text NOT NULL,
    shard integer NOT NULL,
    processed bigint NOT NULL,
    failed bigint NOT NULL,
    PRIMARY KEY (queue, minute, kind, shard)
);

CREATE FUNCTION {s}.tally(q text, k text, ok bigint, bad bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    this_minute bigint := {s}.now_us() / 60000000;
BEGIN
    INSERT INTO {s}.throughput AS t VALUES (q, this_minute, k, pg_backend_pid() % 16, ok, bad)
    ON CONFLICT (queue, minute, kind, shard)
    DO UPDATE SET processed = t.processed + excluded.processed, failed = t.failed + excluded.failed;
    IF random() < 0.001 THEN
        DELETE FROM {s}.throughput t WHERE t.queue = q AND t.minute < this_minute - 1440;
    END IF;
END
$$;

-- The backlog, sampled once a minute per queue for the dashboard: the
-- pending count and how late the oldest due pending job was (0: none due),
-- written by the first reserve of a minute among a process's handles that
-- finds no sample of that minute yet; kept 24 hours.
CREATE TABLE {s}.samples (
    queue text NOT NULL,
    minute bigint NOT NULL,
    pending bigint NOT NULL,
    late_us bigint NOT NULL,
    PRIMARY KEY (queue, minute)
);

-- The channel a queue's wake-ups go on: an identifier of at most 63 bytes
-- whatever the names' lengths.
CREATE FUNCTION {s}.channel(q text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'delayq_' || left(md5({lit} || '.' || q), 24)
$$;

-- Stores jobs (dues absolute, or delays from the server's now when
-- `relative`), ids in order; announces the earliest due time (delivered
-- when the transaction commits).
CREATE FUNCTION {s}.send(q text, last_attempt integer, kinds text[], payloads bytea[],
                         dues bigint[], relative boolean)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    now bigint := {s}.now_us();
    first bigint;
BEGIN
    IF cardinality(dues) = 0 THEN
        RETURN;
    END IF;
    SELECT min(CASE WHEN relative THEN now + d ELSE d END) INTO first FROM unnest(dues) AS d;
    RETURN QUERY
        WITH ins AS (
            INSERT INTO {s}.jobs (queue, id, state, due_us, deadline_us, last_attempt, kind, payload)
            SELECT q, nextval('{s}.job_ids'), 0, x.due, x.due, send.last_attempt, x.kind, x.payload
            FROM (SELECT CASE WHEN relative THEN now + t.d ELSE t.d END AS due, t.k AS kind, t.p AS payload, t.n
                  FROM unnest(dues, kinds, payloads) WITH ORDINALITY AS t(d, k, p, n)) AS x
            ORDER BY x.n
            RETURNING id)
        SELECT ins.id FROM ins ORDER BY ins.id;
    PERFORM pg_notify({s}.channel(q), first::text);
END
$$;

-- Leases up to `lim` due jobs for `lease_us`, each with its token from
-- `tokens`, skipping rows other reservers hold: due first, then by id. A
-- lease that ran out on the last attempt is buried on the way. With no job,
-- one row of NULLs but the server's now and the next due time.
CREATE FUNCTION {s}.reserve(q text, lim integer, lease_us bigint, tokens bigint[])
RETURNS TABLE (id bigint, attempt integer, token bigint, lease_until bigint, deadline bigint,
               payload bytea, kind text, last_error text, server_now bigint, next_due bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    now bigint := {s}.now_us();
    n integer := 0;
    buried integer;
    r record;
BEGIN
    LOOP
        buried := 0;
        FOR r IN
            SELECT j.id, j.state, j.attempt, j.last_attempt, j.kind FROM {s}.jobs j
            WHERE j.queue = q AND j.state < 2 AND j.due_us <= now
            ORDER BY j.due_us, j.id
            LIMIT lim - n
            FOR UPDATE SKIP LOCKED
        LOOP
            IF r.state = 1 THEN
                PERFORM {s}.tally(q, r.kind, 0, 1);
            END IF;
            IF r.state = 1 AND r.attempt >= r.last_attempt THEN
                UPDATE {s}.jobs j SET state = 2, due_us = now, token = 0,
                    last_error = 'lease expired (attempt ' || r.attempt || ')'
                WHERE j.queue = q AND j.id = r.id;
                buried := buried + 1;
            ELSE
                n := n + 1;
                UPDATE {s}.jobs j SET state = 1, attempt = j.attempt + 1, token = tokens[n],
                    due_us = now + lease_us,
                    last_error = CASE WHEN r.state = 1
                        THEN 'lease expired (attempt ' || r.attempt || ')' ELSE j.last_error END
                WHERE j.queue = q AND j.id = r.id
                RETURNING j.id, j.attempt, j.token, j.due_us, j.deadline_us, j.payload, j.kind, j.last_error
                INTO id, attempt, token, lease_until, deadline, payload, kind, last_error;
                server_now := now;
                next_due := NULL;
                RETURN NEXT;
            END IF;
        END LOOP;
        EXIT WHEN buried = 0 OR n >= lim;
    END LOOP;
    IF n = 0 THEN
        id := NULL; attempt := NULL; token := NULL; lease_until := NULL; deadline := NULL;
        payload := NULL; kind := NULL; last_error := NULL;
        server_now := now;
        -- Read without a lock, so that a reserve that finds nothing writes
        -- nothing (no transaction id, no commit to flush). A due time
        -- already past is a job another transaction holds this moment.
        SELECT j.due_us INTO next_due FROM {s}.jobs j
        WHERE j.queue = q AND j.state < 2
        ORDER BY j.due_us, j.id LIMIT 1;
        RETURN NEXT;
    END IF;
END
$$;

-- A retry at `retry_us`, or death after the last attempt; `err` NULL
-- keeps the last error.
CREATE FUNCTION {s}.nack(q text, jid bigint, tok bigint, retry_us bigint, err text)
RETURNS boolean LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    SELECT j.attempt, j.last_attempt, j.kind INTO r FROM {s}.jobs j
    WHERE j.queue = q AND j.id = jid AND j.token = tok AND j.state = 1
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM {s}.tally(q, r.kind, 0, 1);
    IF r.attempt >= r.last_attempt THEN
        UPDATE {s}.jobs j SET state = 2, due_us = {s}.now_us(), token = 0,
            last_error = coalesce(err, j.last_error)
        WHERE j.queue = q AND j.id = jid;
    ELSE
        UPDATE {s}.jobs j SET state = 0, due_us = retry_us, deadline_us = retry_us, token = 0,
            last_error = coalesce(err, j.last_error)
        WHERE j.queue = q AND j.id = jid;
        PERFORM pg_notify({s}.channel(q), retry_us::text);
    END IF;
    RETURN true;
END
$$;

-- Dead jobs back to pending, due at `at_us`, with `more` deliveries.
CREATE FUNCTION {s}.requeue(q text, ids bigint[], at_us bigint, more integer)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    moved bigint[];
BEGIN
    WITH up AS (
        UPDATE {s}.jobs j SET state = 0, due_us = at_us, deadline_us = at_us, token = 0,
            last_attempt = j.attempt + more
        WHERE j.queue = q AND j.id = ANY(ids) AND j.state = 2
        RETURNING j.id)
    SELECT coalesce(array_agg(up.id), '{}') INTO moved FROM up;
    IF cardinality(moved) > 0 THEN
        PERFORM pg_notify({s}.channel(q), at_us::text);
    END IF;
    RETURN QUERY SELECT unnest(moved);
END
$$;
"#;

/// Version 2 (issue 33): priorities (and aging), uniqueness keys,
/// reserves that exclude kinds, the schedule store.
const V2: &str = r#"
-- priority: 0..=9, 0 reserved first among due jobs. unique_key: the key
-- the job's send held (NULL: none), so that its deletion or death releases
-- it (the triggers below). Both added without a table rewrite.
ALTER TABLE {s}.jobs ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE {s}.jobs ADD COLUMN unique_key text;

-- What reserve reads: per priority level, due first, then by id; each
-- level's head is its oldest (most aged) due job.
CREATE INDEX jobs_ready ON {s}.jobs (queue, priority, due_us, id) WHERE state < 2;
-- What a reserve that excludes kinds reads: the kinds present (a skip
-- scan), then per kind it may take and level, due first, then by id.
CREATE INDEX jobs_kind_ready ON {s}.jobs (queue, kind, priority, due_us, id) WHERE state < 2;

-- Uniqueness keys: the job that holds (or last held) each key, the states
-- its send covered (0 pending, 1 leased, 2 both) and the end of its period
-- (server µs; NULL: none).
CREATE TABLE {s}.unique_keys (
    queue text NOT NULL,
    key text NOT NULL,
    job_id bigint NOT NULL,
    states smallint NOT NULL,
    until_us bigint,
    PRIMARY KEY (queue, key)
);
CREATE INDEX unique_keys_until ON {s}.unique_keys (queue, until_us) WHERE until_us IS NOT NULL;

-- A job with a key deleted (acked, cancelled) or dead releases the key,
-- unless its period still runs (then the sweep in send_with removes it
-- later). The WHEN clause keeps jobs without a key free of any call.
CREATE FUNCTION {s}.unique_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.unique_keys u
    WHERE u.queue = OLD.queue AND u.key = OLD.unique_key AND u.job_id = OLD.id
      AND (u.until_us IS NULL OR u.until_us <= {s}.now_us());
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_unique_deleted AFTER DELETE ON {s}.jobs
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.unique_release();
CREATE TRIGGER jobs_unique_dead AFTER UPDATE OF state ON {s}.jobs
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL AND NEW.state = 2 AND OLD.state < 2)
    EXECUTE FUNCTION {s}.unique_release();

-- Removes up to 16 key rows of queue `q` whose period ran out by `now`
-- and whose job is gone or dead; a row whose job lives is kept, held by
-- its states only (released by the triggers). Rows another transaction
-- holds are skipped: a send runs this after it holds its own key, and it
-- waits for nothing, so two sends never wait for each other's keys.
CREATE FUNCTION {s}.unique_sweep(q text, now bigint) RETURNS void LANGUAGE sql AS $$
    WITH old AS (
        SELECT x.key, x.job_id FROM {s}.unique_keys x
        WHERE x.queue = q AND x.until_us <= now
        ORDER BY x.until_us LIMIT 16 FOR UPDATE SKIP LOCKED),
    gone AS (
        DELETE FROM {s}.unique_keys x USING old
        WHERE x.queue = q AND x.key = old.key
          AND NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.queue = q AND j.id = old.job_id AND j.state < 2)),
    kept AS (
        UPDATE {s}.unique_keys x SET until_us = NULL FROM old
        WHERE x.queue = q AND x.key = old.key
          AND EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.queue = q AND j.id = old.job_id AND j.state < 2))
    SELECT 1
$$;

-- Stores one job due at `due` (server µs) with a priority and, when `ukey`
-- is not NULL, a uniqueness key: if a job holds the key, stores nothing and
-- returns that job (created false). The key's row is inserted, or locked,
-- before anything is decided, so racing sends of one key are serialized
-- on it and store one job. Then sweeps up to 16 rows whose period ran out.
CREATE FUNCTION {s}.send_with(q text, last_attempt integer, k text, p bytea, due bigint,
                              prio smallint, ukey text, ustates smallint, period_us bigint)
RETURNS TABLE (id bigint, created boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    now bigint := {s}.now_us();
    jid bigint := nextval('{s}.job_ids');
    u record;
    st smallint;
    held boolean;
BEGIN
    IF ukey IS NOT NULL THEN
        LOOP
            INSERT INTO {s}.unique_keys AS x (queue, key, job_id, states, until_us)
            VALUES (q, ukey, jid, ustates, CASE WHEN period_us > 0 THEN now + period_us END)
            ON CONFLICT (queue, key) DO NOTHING;
            EXIT WHEN FOUND;
            SELECT x.job_id, x.states, x.until_us INTO u FROM {s}.unique_keys x
            WHERE x.queue = q AND x.key = ukey FOR UPDATE;
            IF FOUND THEN
                held := u.until_us IS NOT NULL AND now < u.until_us;
                IF NOT held THEN
                    SELECT j.state INTO st FROM {s}.jobs j WHERE j.queue = q AND j.id = u.job_id;
                    held := FOUND AND st < 2 AND (u.states = 2 OR u.states = st);
                END IF;
                IF held THEN
                    PERFORM {s}.unique_sweep(q, now);
                    id := u.job_id;
                    created := false;
                    RETURN NEXT;
                    RETURN;
                END IF;
                UPDATE {s}.unique_keys x SET job_id = jid, states = ustates,
                    until_us = CASE WHEN period_us > 0 THEN now + period_us END
                WHERE x.queue = q AND x.key = ukey;
                EXIT;
            END IF;
            -- Deleted between the insert and the lock: try again.
        END LOOP;
        PERFORM {s}.unique_sweep(q, now);
    END IF;
    INSERT INTO {s}.jobs (queue, id, state, due_us, deadline_us, last_attempt, kind, payload, priority, unique_key)
    VALUES (q, jid, 0, due, due, send_with.last_attempt, k, p, prio, ukey);
    PERFORM pg_notify({s}.channel(q), due::text);
    id := jid;
    created := true;
    RETURN NEXT;
END
$$;

-- Leases up to `lim` due jobs whose kind is not in `excluded`, each with
-- its token from `tokens`, skipping rows other reservers hold. The order:
-- priority, then due time, then id; with `step` > 0 (aging, µs), the
-- effective priority greatest(priority - (now - due) / step, 0) first.
-- Without aging or exclusions: one SKIP LOCKED range scan per priority
-- level (at most 10). With aging: each level's first `lim + 32` due jobs
-- read without a lock (10 range scans; a level is ordered by due time, so
-- by effective priority too), merged by the key, then locked one by one by
-- primary key, SKIP LOCKED, again while a round leases anything. With
-- kinds excluded: the kinds present found by a skip scan of
-- jobs_kind_ready (one probe per kind), then the same with each allowed
-- kind's and level's first `lim + 4` due jobs, so the excluded jobs are
-- never read. A lease
-- that ran out on the last attempt is buried on the way. With no job, one
-- row of NULLs but the server's now and the next due time of a job it may
-- take.
CREATE FUNCTION {s}.reserve_with(q text, lim integer, lease_us bigint, tokens bigint[],
                                 excluded text[], step bigint)
RETURNS TABLE (id bigint, attempt integer, token bigint, lease_until bigint, deadline bigint,
               payload bytea, kind text, last_error text, priority smallint,
               server_now bigint, next_due bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    now bigint := {s}.now_us();
    n integer := 0;
    took integer;
    buried integer;
    level integer;
    cand bigint;
    cands bigint[];
    r record;
    -- With kinds excluded: the kinds present that it may take (NULL: any).
    allowed text[];
BEGIN
    IF cardinality(excluded) > 0 THEN
        allowed := ARRAY(
            WITH RECURSIVE k(kind) AS (
                (SELECT j.kind FROM {s}.jobs j WHERE j.queue = q AND j.state < 2
                 ORDER BY j.kind LIMIT 1)
                UNION ALL
                SELECT (SELECT j.kind FROM {s}.jobs j WHERE j.queue = q AND j.state < 2 AND j.kind > k.kind
                        ORDER BY j.kind LIMIT 1)
                FROM k WHERE k.kind IS NOT NULL)
            SELECT k.kind FROM k WHERE k.kind IS NOT NULL AND k.kind <> ALL(excluded));
    END IF;
    LOOP
        took := 0;
        buried := 0;
        IF allowed IS NOT NULL THEN
            cands := ARRAY(
                SELECT c.id FROM unnest(allowed) AS a(kind) CROSS JOIN generate_series(0, 9) AS l(level)
                CROSS JOIN LATERAL (
                    SELECT j.id, j.due_us, j.priority FROM {s}.jobs j
                    WHERE j.queue = q AND j.state < 2 AND j.kind = a.kind AND j.priority = l.level
                      AND j.due_us <= now
                    ORDER BY j.due_us, j.id LIMIT lim - n + 4) AS c
                ORDER BY CASE WHEN step > 0 THEN greatest(c.priority - (now - c.due_us) / step, 0)
                              ELSE c.priority END, c.due_us, c.id);
        ELSIF step > 0 THEN
            cands := ARRAY(
                SELECT c.id FROM generate_series(0, 9) AS l(level)
                CROSS JOIN LATERAL (
                    SELECT j.id, j.due_us, j.priority FROM {s}.jobs j
                    WHERE j.queue = q AND j.state < 2 AND j.priority = l.level AND j.due_us <= now
                    ORDER BY j.due_us, j.id LIMIT lim - n + 32) AS c
                ORDER BY greatest(c.priority - (now - c.due_us) / step, 0), c.due_us, c.id);
        END IF;
        IF cands IS NOT NULL THEN
            FOREACH cand IN ARRAY cands LOOP
                SELECT j.id, j.state, j.attempt, j.last_attempt, j.kind INTO r FROM {s}.jobs j
                WHERE j.queue = q AND j.id = cand AND j.state < 2 AND j.due_us <= now
                FOR UPDATE SKIP LOCKED;
                CONTINUE WHEN NOT FOUND;
                took := took + 1;
                IF r.state = 1 THEN
                    PERFORM {s}.tally(q, r.kind, 0, 1);
                END IF;
                IF r.state = 1 AND r.attempt >= r.last_attempt THEN
                    UPDATE {s}.jobs j SET state = 2, due_us = now, token = 0,
                        last_error = 'lease expired (attempt ' || r.attempt || ')'
                    WHERE j.queue = q AND j.id = r.id;
                ELSE
                    n := n + 1;
                    UPDATE {s}.jobs j SET state = 1, attempt = j.attempt + 1, token = tokens[n],
                        due_us = now + lease_us,
                        last_error = CASE WHEN r.state = 1
                            THEN 'lease expired (attempt ' || r.attempt || ')' ELSE j.last_error END
                    WHERE j.queue = q AND j.id = r.id
                    RETURNING j.id, j.attempt, j.token, j.due_us, j.deadline_us, j.payload, j.kind,
                              j.last_error, j.priority
                    INTO id, attempt, token, lease_until, deadline, payload, kind, last_error, priority;
                    server_now := now;
                    next_due := NULL;
                    RETURN NEXT;
                    EXIT WHEN n >= lim;
                END IF;
            END LOOP;
        ELSE
            FOR level IN 0..9 LOOP
                FOR r IN
                    SELECT j.id, j.state, j.attempt, j.last_attempt, j.kind FROM {s}.jobs j
                    WHERE j.queue = q AND j.state < 2 AND j.priority = level AND j.due_us <= now
                    ORDER BY j.due_us, j.id
                    LIMIT lim - n
                    FOR UPDATE SKIP LOCKED
                LOOP
                    IF r.state = 1 THEN
                        PERFORM {s}.tally(q, r.kind, 0, 1);
                    END IF;
                    IF r.state = 1 AND r.attempt >= r.last_attempt THEN
                        UPDATE {s}.jobs j SET state = 2, due_us = now, token = 0,
                            last_error = 'lease expired (attempt ' || r.attempt || ')'
                        WHERE j.queue = q AND j.id = r.id;
                        buried := buried + 1;
                    ELSE
                        n := n + 1;
                        UPDATE {s}.jobs j SET state = 1, attempt = j.attempt + 1, token = tokens[n],
                            due_us = now + lease_us,
                            last_error = CASE WHEN r.state = 1
                                THEN 'lease expired (attempt ' || r.attempt || ')' ELSE j.last_error END
                        WHERE j.queue = q AND j.id = r.id
                        RETURNING j.id, j.attempt, j.token, j.due_us, j.deadline_us, j.payload, j.kind,
                                  j.last_error, j.priority
                        INTO id, attempt, token, lease_until, deadline, payload, kind, last_error, priority;
                        server_now := now;
                        next_due := NULL;
                        RETURN NEXT;
                    END IF;
                END LOOP;
                EXIT WHEN n >= lim;
            END LOOP;
        END IF;
        -- Again only if this round may have left jobs to take: without
        -- candidates, if it buried some (as version 1); with candidates, if
        -- it took any (they were cut at a few a level). A round that took
        -- nothing found nothing to take.
        EXIT WHEN n >= lim OR (cands IS NOT NULL AND took = 0) OR (cands IS NULL AND buried = 0);
    END LOOP;
    IF n = 0 THEN
        id := NULL; attempt := NULL; token := NULL; lease_until := NULL; deadline := NULL;
        payload := NULL; kind := NULL; last_error := NULL; priority := NULL;
        server_now := now;
        -- Read without a lock (a reserve that finds nothing writes
        -- nothing). A due time already past is a job another transaction
        -- holds this moment; excluded kinds are no wake-up of this caller.
        IF allowed IS NULL THEN
            SELECT j.due_us INTO next_due FROM {s}.jobs j
            WHERE j.queue = q AND j.state < 2
            ORDER BY j.due_us, j.id LIMIT 1;
        ELSE
            SELECT min(h.due_us) INTO next_due
            FROM unnest(allowed) AS a(kind) CROSS JOIN generate_series(0, 9) AS l(level)
            CROSS JOIN LATERAL (
                SELECT j.due_us FROM {s}.jobs j
                WHERE j.queue = q AND j.state < 2 AND j.kind = a.kind AND j.priority = l.level
                ORDER BY j.due_us LIMIT 1) AS h;
        END IF;
        RETURN NEXT;
    END IF;
END
$$;

-- Version 1's reserve, for handles opened before the upgrade: now in
-- priority order.
CREATE OR REPLACE FUNCTION {s}.reserve(q text, lim integer, lease_us bigint, tokens bigint[])
RETURNS TABLE (id bigint, attempt integer, token bigint, lease_until bigint, deadline bigint,
               payload bytea, kind text, last_error text, server_now bigint, next_due bigint)
LANGUAGE sql AS $$
    SELECT r.id, r.attempt, r.token, r.lease_until, r.deadline, r.payload, r.kind, r.last_error,
           r.server_now, r.next_due
    FROM {s}.reserve_with(q, lim, lease_us, tokens, '{}', 0) AS r
$$;

-- The schedule store: per queue and name, the definition (opaque), the
-- next tick (NULL: paused), the last tick fired, and the id of the
-- schedule's pending tick job (NULL: none).
CREATE TABLE {s}.schedules (
    queue text NOT NULL,
    name text NOT NULL,
    def bytea NOT NULL,
    next_run_us bigint,
    last_run_us bigint,
    tick_job bigint,
    PRIMARY KEY (queue, name)
);

-- A schedule's tick job: kind 'delayq.schedule', its name as the payload,
-- priority 0, due at `due`; its id.
CREATE FUNCTION {s}.tick(q text, last_attempt integer, n text, due bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint := nextval('{s}.job_ids');
BEGIN
    INSERT INTO {s}.jobs (queue, id, state, due_us, deadline_us, last_attempt, kind, payload)
    VALUES (q, jid, 0, due, due, tick.last_attempt, 'delayq.schedule', convert_to(n, 'UTF8'));
    PERFORM pg_notify({s}.channel(q), due::text);
    RETURN jid;
END
$$;

-- Creates or replaces a schedule (keeping its last tick) and replaces its
-- pending tick job: one due at `next` (none while paused).
CREATE FUNCTION {s}.schedule_store(q text, last_attempt integer, n text, d bytea, next_us bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    old bigint;
BEGIN
    LOOP
        INSERT INTO {s}.schedules (queue, name, def) VALUES (q, n, d) ON CONFLICT DO NOTHING;
        SELECT s.tick_job INTO old FROM {s}.schedules s WHERE s.queue = q AND s.name = n FOR UPDATE;
        EXIT WHEN FOUND;
    END LOOP;
    DELETE FROM {s}.jobs j WHERE j.queue = q AND j.id = old AND j.state = 0;
    UPDATE {s}.schedules s SET def = d, next_run_us = next_us,
        tick_job = CASE WHEN next_us IS NULL THEN NULL ELSE {s}.tick(q, last_attempt, n, next_us) END
    WHERE s.queue = q AND s.name = n;
END
$$;

-- Deletes a schedule and its pending tick job.
CREATE FUNCTION {s}.schedule_remove(q text, n text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    old bigint;
BEGIN
    DELETE FROM {s}.schedules s WHERE s.queue = q AND s.name = n RETURNING s.tick_job INTO old;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM {s}.jobs j WHERE j.queue = q AND j.id = old AND j.state = 0;
    RETURN true;
END
$$;

-- Fires a schedule's tick if its next tick is `expect` (compare-and-set
-- under the schedule's row lock): stores one job per deadline, moves the
-- next and last tick, replaces the pending tick job. In every case a
-- schedule not paused is left with a pending tick job.
CREATE FUNCTION {s}.schedule_fire(q text, last_attempt integer, n text, expect bigint,
                                  next_us bigint, last_us bigint, k text, p bytea, prio smallint,
                                  deadlines bigint[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    sch record;
BEGIN
    SELECT s.next_run_us, s.tick_job INTO sch FROM {s}.schedules s
    WHERE s.queue = q AND s.name = n FOR UPDATE;
    IF NOT FOUND OR sch.next_run_us IS NULL THEN
        RETURN false;
    END IF;
    IF sch.next_run_us = expect THEN
        IF cardinality(deadlines) > 0 THEN
            INSERT INTO {s}.jobs (queue, id, state, due_us, deadline_us, last_attempt, kind, payload, priority)
            SELECT q, nextval('{s}.job_ids'), 0, t.d, t.d, schedule_fire.last_attempt, k, p, prio
            FROM unnest(deadlines) WITH ORDINALITY AS t(d, o) ORDER BY t.o;
            PERFORM pg_notify({s}.channel(q), min(t.d)::text) FROM unnest(deadlines) AS t(d);
        END IF;
        DELETE FROM {s}.jobs j WHERE j.queue = q AND j.id = sch.tick_job AND j.state = 0;
        UPDATE {s}.schedules s SET next_run_us = next_us, last_run_us = last_us,
            tick_job = {s}.tick(q, last_attempt, n, next_us)
        WHERE s.queue = q AND s.name = n;
        RETURN true;
    END IF;
    IF sch.tick_job IS NULL
       OR NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.queue = q AND j.id = sch.tick_job AND j.state = 0) THEN
        UPDATE {s}.schedules s SET tick_job = {s}.tick(q, last_attempt, n, sch.next_run_us)
        WHERE s.queue = q AND s.name = n;
    END IF;
    RETURN false;
END
$$;
"#;

/// A schema name as an identifier, double-quoted.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string as an SQL literal.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Migration `i` (0-based) for schema `name`.
pub(crate) fn migration(name: &str, i: usize) -> String {
    migrations()[i].replace("{s}", &quote_ident(name)).replace("{lit}", &quote_literal(name))
}

/// What opening runs first, in the migration's transaction: the schema,
/// the version table, and the lock that orders concurrent openers (its key:
/// a hash of the schema's name).
pub(crate) fn prelude(name: &str) -> String {
    let s = quote_ident(name);
    format!(
        "SELECT pg_advisory_xact_lock(hashtext({lit})::bigint + 7204812400);
         CREATE SCHEMA IF NOT EXISTS {s};
         CREATE TABLE IF NOT EXISTS {s}.delayq_schema (version integer NOT NULL);",
        lit = quote_literal(&format!("delayq schema {name}")),
    )
}

/// The statements the queue prepares on each connection, by [`Stmt`].
pub(crate) struct Sql {
    texts: Vec<String>,
}

/// The queue's statements.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Stmt {
    Send,
    Reserve,
    Ack,
    AckMany,
    Nack,
    Kill,
    Extend,
    Cancel,
    Requeue,
    Stats,
    Dead,
    Version,
    Channel,
    ScanState,
    Rows,
    One,
    OldestDue,
    Kinds,
    CancelIn,
    Exists,
    Throughput,
    Sample,
    Samples,
    SendWith,
    ScheduleStore,
    ScheduleGet,
    ScheduleList,
    ScheduleRemove,
    ScheduleFire,
}

/// Every statement, in [`Stmt`] order.
const ALL: [Stmt; 29] = [
    Stmt::Send,
    Stmt::Reserve,
    Stmt::Ack,
    Stmt::AckMany,
    Stmt::Nack,
    Stmt::Kill,
    Stmt::Extend,
    Stmt::Cancel,
    Stmt::Requeue,
    Stmt::Stats,
    Stmt::Dead,
    Stmt::Version,
    Stmt::Channel,
    Stmt::ScanState,
    Stmt::Rows,
    Stmt::One,
    Stmt::OldestDue,
    Stmt::Kinds,
    Stmt::CancelIn,
    Stmt::Exists,
    Stmt::Throughput,
    Stmt::Sample,
    Stmt::Samples,
    Stmt::SendWith,
    Stmt::ScheduleStore,
    Stmt::ScheduleGet,
    Stmt::ScheduleList,
    Stmt::ScheduleRemove,
    Stmt::ScheduleFire,
];

/// The columns a listing reads, in [`JobInfo`](crate::JobInfo) order.
const INFO: &str = "id, state, kind, deadline_us, attempt, due_us, last_error, payload, priority";

impl Sql {
    pub(crate) fn new(name: &str) -> Sql {
        let s = quote_ident(name);
        let text = |stmt: Stmt| -> String {
            match stmt {
                Stmt::Send => format!(
                    "SELECT {s}.send($1::text, $2::integer, $3::text[], $4::bytea[], $5::bigint[], $6::boolean)"
                ),
                Stmt::Reserve => format!(
                    "SELECT * FROM {s}.reserve_with($1::text, $2::integer, $3::bigint, $4::bigint[],
                                                   $5::text[], $6::bigint)"
                ),
                Stmt::SendWith => format!(
                    "SELECT * FROM {s}.send_with($1::text, $2::integer, $3::text, $4::bytea, $5::bigint,
                                                $6::smallint, $7::text, $8::smallint, $9::bigint)"
                ),
                Stmt::ScheduleStore => format!(
                    "SELECT {s}.schedule_store($1::text, $2::integer, $3::text, $4::bytea, $5::bigint)"
                ),
                Stmt::ScheduleGet => format!(
                    "SELECT name, def, next_run_us, last_run_us FROM {s}.schedules
                     WHERE queue = $1 AND name = $2"
                ),
                Stmt::ScheduleList => format!(
                    "SELECT name, def, next_run_us, last_run_us FROM {s}.schedules
                     WHERE queue = $1 ORDER BY name COLLATE \"C\""
                ),
                Stmt::ScheduleRemove => format!("SELECT {s}.schedule_remove($1::text, $2::text)"),
                Stmt::ScheduleFire => format!(
                    "SELECT {s}.schedule_fire($1::text, $2::integer, $3::text, $4::bigint, $5::bigint,
                                              $6::bigint, $7::text, $8::bytea, $9::smallint, $10::bigint[])"
                ),
                Stmt::Ack => format!(
                    "WITH d AS (DELETE FROM {s}.jobs
                                WHERE queue = $1 AND id = $2 AND token = $3 AND state = 1 RETURNING kind)
                     SELECT {s}.tally($1, d.kind, 1, 0) FROM d"
                ),
                Stmt::AckMany => format!(
                    "WITH d AS (DELETE FROM {s}.jobs j USING unnest($2::bigint[], $3::bigint[]) AS a(id, token)
                                WHERE j.queue = $1 AND j.id = a.id AND j.token = a.token AND j.state = 1
                                RETURNING j.id, j.kind),
                          c AS (SELECT {s}.tally($1, d.kind, count(*), 0) FROM d GROUP BY d.kind)
                     SELECT d.id FROM d, (SELECT count(*) FROM c) AS counted"
                ),
                Stmt::Nack => format!(
                    "SELECT {s}.nack($1::text, $2::bigint, $3::bigint, $4::bigint, $5::text)"
                ),
                Stmt::Kill => format!(
                    "WITH k AS (UPDATE {s}.jobs SET state = 2, due_us = {s}.now_us(), token = 0, last_error = $4
                                WHERE queue = $1 AND id = $2 AND token = $3 AND state = 1 RETURNING kind)
                     SELECT {s}.tally($1, k.kind, 0, 1) FROM k"
                ),
                Stmt::Extend => format!(
                    "UPDATE {s}.jobs SET due_us = {s}.now_us() + $4
                     WHERE queue = $1 AND id = $2 AND token = $3 AND state = 1"
                ),
                Stmt::Cancel => format!("DELETE FROM {s}.jobs WHERE queue = $1 AND id = $2"),
                Stmt::Requeue => format!(
                    "SELECT {s}.requeue($1::text, $2::bigint[], $3::bigint, $4::integer)"
                ),
                Stmt::Stats => {
                    format!("SELECT state, count(*) FROM {s}.jobs WHERE queue = $1 GROUP BY state")
                }
                Stmt::Dead => format!(
                    "SELECT id, attempt, deadline_us, payload, kind, last_error, priority FROM {s}.jobs
                     WHERE queue = $1 AND state = 2 ORDER BY due_us, id LIMIT $2"
                ),
                Stmt::Version => format!("SELECT version FROM {s}.delayq_schema"),
                Stmt::Channel => format!("SELECT {s}.channel($1::text)"),
                Stmt::ScanState => format!(
                    "SELECT id, kind, last_error FROM {s}.jobs
                     WHERE queue = $1 AND state = $2 AND id >= $3 ORDER BY id LIMIT $4"
                ),
                Stmt::Rows => format!(
                    "SELECT {INFO} FROM {s}.jobs
                     WHERE queue = $1 AND id = ANY($2::bigint[]) AND state = $3 ORDER BY id"
                ),
                Stmt::One => format!("SELECT {INFO} FROM {s}.jobs WHERE queue = $1 AND id = $2"),
                Stmt::OldestDue => {
                    format!("SELECT min(due_us) FROM {s}.jobs WHERE queue = $1 AND state = 0")
                }
                Stmt::Kinds => format!(
                    "SELECT kind, state, count(*) FROM {s}.jobs WHERE queue = $1 GROUP BY kind, state"
                ),
                Stmt::CancelIn => format!(
                    "DELETE FROM {s}.jobs WHERE queue = $1 AND id = ANY($2::bigint[])
                     AND state = ANY($3::smallint[]) RETURNING id"
                ),
                Stmt::Exists => format!("SELECT EXISTS (SELECT 1 FROM {s}.jobs WHERE queue = $1)"),
                Stmt::Throughput => format!(
                    "SELECT minute, kind, sum(processed)::bigint, sum(failed)::bigint FROM {s}.throughput
                     WHERE queue = $1 AND minute >= $2 GROUP BY minute, kind ORDER BY minute, kind"
                ),
                // Counts the pending jobs only when the minute has no sample
                // yet (the target list is evaluated for the rows kept).
                Stmt::Sample => format!(
                    "WITH m AS (SELECT us, us / 60000000 AS minute FROM {s}.now_us() AS us),
                          old AS (DELETE FROM {s}.samples
                                  WHERE queue = $1 AND minute < (SELECT minute FROM m) - 1440)
                     INSERT INTO {s}.samples (queue, minute, pending, late_us)
                     SELECT $1, m.minute,
                            (SELECT count(*) FROM {s}.jobs j WHERE j.queue = $1 AND j.state = 0),
                            coalesce(m.us - (SELECT min(j.due_us) FROM {s}.jobs j
                                             WHERE j.queue = $1 AND j.state = 0 AND j.due_us <= m.us), 0)
                     FROM m
                     WHERE NOT EXISTS (SELECT 1 FROM {s}.samples x WHERE x.queue = $1 AND x.minute = m.minute)
                     ON CONFLICT (queue, minute) DO NOTHING"
                ),
                Stmt::Samples => format!(
                    "SELECT minute, pending, late_us FROM {s}.samples
                     WHERE queue = $1 AND minute >= $2 ORDER BY minute"
                ),
            }
        };
        Sql { texts: ALL.iter().map(|&stmt| text(stmt)).collect() }
    }

    pub(crate) fn text(&self, stmt: Stmt) -> &str {
        &self.texts[stmt as usize]
    }
}
