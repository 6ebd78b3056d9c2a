//! The Lua scripts: every state change of a Redis-backed job is one script,
//! atomic on the server, reading "now" from the server's `TIME` (never a
//! client's clock).
//!
//! Keys, under one hash tag per queue (`delayq:{name}:`), so a queue's keys
//! share a cluster slot:
//!
//! | key | type | what |
//! | --- | --- | --- |
//! | `seq` | string | the last job id (`INCR`) |
//! | `job:<id>` | hash | `payload`, `kind` (absent or `""`: none), `error` (the last error; absent: none), `deadline` (µs), `attempt`, `dead_after`, `token` (decimal; `0`: none), `lease_until` (µs), `state` (`p` pending, `l` leased, `d` dead) |
//! | `pending` | zset | pending jobs by due time (µs since the Unix epoch, server clock) |
//! | `leased` | zset | leased jobs by lease end |
//! | `dead` | zset | dead jobs by time of death |
//! | `tp:<minute>` | hash | jobs processed (`ok:<kind>`) and failed (`fail:<kind>`: an attempt nacked, killed or whose lease ran out) in that minute (µs / 60,000,000, server clock); kept 25 h |
//! | `bl:<minute>` | string | the backlog sample of that minute, `"<pending> <lateness µs>"`: the pending count and how late the oldest due job was, written by the minute's first reserve before it takes anything; kept 25 h |
//! | `r:<nonce>` | string | the result of a change, kept for the nonce TTL (the client's retry window plus a margin: 30 s by default), so a call retried after a lost reply is not applied twice |
//! | channel `wake` | pub/sub | the due time of every job made pending (send, nack, requeue) |
//!
//! Times are integer microseconds since the Unix epoch: exact in Lua's doubles
//! (below 2^53) until the year 2255.
//!
//! Lease tokens are random 64-bit numbers chosen by the client (one per job
//! a reserve may lease), stored and compared as decimal strings, never as Lua
//! numbers. A server counter would start again at 1 after a data loss
//! (`FLUSHALL`, a restart without persistence), and a worker still holding a
//! token from before would then ack the job that now has it; a random token
//! matches nothing it was not issued for.
//!
//! Counts and limits reach the scripts as decimal strings the client has
//! clamped (to [`MAX_RESERVE`](super::MAX_RESERVE) jobs a reserve, to `i64`
//! for a listing), and are passed on to Redis as they are: a Lua number above
//! 2^53 would reach Redis as a float and fail as "not an integer".
//!
//! Every script that changes anything takes `ARGV[1]` = nonce and `ARGV[2]` =
//! how long to keep its result (s); its own arguments follow.
//!
//! A `pending`, `leased` or `dead` entry whose `job:<id>` hash is gone (deleted
//! by hand, or evicted by a server not run with `maxmemory-policy noeviction`)
//! is removed from its set when a script meets it, and otherwise ignored: one
//! missing hash must not stop every consumer.

/// Shared by every script: `KEYS[1]` is the queue's key prefix. A due time
/// argument (`due`) is µs after the server's now (`"5000"`, may be
/// negative), or `@` and µs since the epoch on the server's clock
/// (`"@1700000000000000"`: an instant the client mapped with its offset
/// estimate, `clock.rs`).
const PROLOGUE: &str = r#"
local p = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function cached(nonce)
  if nonce == '' then return nil end
  return redis.call('GET', p .. 'r:' .. nonce)
end
local function remember(nonce, v)
  if nonce ~= '' then redis.call('SET', p .. 'r:' .. nonce, v, 'EX', tonumber(ARGV[2])) end
end
local function unlink(id)
  redis.call('ZREM', p .. 'pending', id)
  redis.call('ZREM', p .. 'leased', id)
  redis.call('ZREM', p .. 'dead', id)
end
local function due(a)
  if string.byte(a, 1) == 64 then return tonumber(string.sub(a, 2)) end
  return now + tonumber(a)
end
local function tally(kind, what)
  local key = p .. 'tp:' .. math.floor(now / 60000000)
  redis.call('HINCRBY', key, what .. ':' .. (kind or ''), 1)
  redis.call('EXPIRE', key, 90000)
end
"#;

/// ARGV: nonce, nonce TTL, max_attempts, n, then n triples (due time, as
/// `due` reads it; kind; payload). Returns the ids, in order.
const SEND: &str = r#"
local c = cached(ARGV[1])
if c then return cjson.decode(c) end
local ma = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local ids = {}
local earliest = nil
for i = 1, n do
  local at = due(ARGV[2 + 3 * i])
  if at < 0 then at = 0 end
  local id = redis.call('INCR', p .. 'seq')
  redis.call('HSET', p .. 'job:' .. id, 'payload', ARGV[4 + 3 * i], 'kind', ARGV[3 + 3 * i], 'deadline', at,
    'attempt', 0, 'dead_after', ma, 'token', 0, 'lease_until', 0, 'state', 'p')
  redis.call('ZADD', p .. 'pending', at, id)
  ids[i] = id
  if earliest == nil or at < earliest then earliest = at end
end
remember(ARGV[1], cjson.encode(ids))
redis.call('PUBLISH', p .. 'wake', earliest)
return ids
"#;

/// ARGV: lease µs, max jobs, then `max` lease tokens (the n-th job leased gets
/// the n-th). First ends expired leases (up to 100): each job
/// is due again at its lease end, or dead after its last attempt. Then leases
/// up to `max` due jobs. An entry without its job hash is dropped and skipped
/// (so a reply may carry fewer jobs than were due; the next due time is then
/// at most now, and the client asks again at once). Returns `{now, n, ...}`: with n > 0, eight fields per
/// job (id, attempt, token, lease_until, deadline, payload, kind, error — the
/// last two `""` when absent); with n = 0, the
/// next due time (a pending deadline or a lease end), or -1 if none. Then,
/// last, four counts for the client's metrics: the expired leases acted on
/// (the job due again or dead; an entry without its hash is not counted), and
/// the jobs pending, leased and dead after the script (`ZCARD`s, O(1) each).
/// A reader that stops after the jobs or the next due time (as the first
/// form of this reply did) is not disturbed by them.
const RESERVE: &str = r#"
local lease = tonumber(ARGV[1])
local max = ARGV[2]
local expired = redis.call('ZRANGEBYSCORE', p .. 'leased', '-inf', now, 'LIMIT', 0, 100)
local ended = 0
for _, id in ipairs(expired) do
  local k = p .. 'job:' .. id
  redis.call('ZREM', p .. 'leased', id)
  local f = redis.call('HMGET', k, 'attempt', 'dead_after', 'lease_until', 'kind')
  if not f[1] or not f[2] or not f[3] then
    -- The hash is gone: nothing to redeliver.
  elseif tonumber(f[1]) >= tonumber(f[2]) then
    redis.call('HSET', k, 'state', 'd', 'token', 0, 'error', 'lease expired (attempt ' .. f[1] .. ')')
    redis.call('ZADD', p .. 'dead', now, id)
    tally(f[4], 'fail')
    ended = ended + 1
  else
    -- Due again; the token stays, so a late ack still counts until the job
    -- is leased to someone else. Why it came back is its last error.
    redis.call('HSET', k, 'state', 'p', 'error', 'lease expired (attempt ' .. f[1] .. ')')
    redis.call('ZADD', p .. 'pending', f[3], id)
    tally(f[4], 'fail')
    ended = ended + 1
  end
end
-- The minute's backlog sample, if this is its first reserve: one EXISTS a
-- reserve, the rest once a minute.
local bl = p .. 'bl:' .. math.floor(now / 60000000)
if redis.call('EXISTS', bl) == 0 then
  local first = redis.call('ZRANGE', p .. 'pending', 0, 0, 'WITHSCORES')
  local late = 0
  if first[2] and tonumber(first[2]) < now then late = now - tonumber(first[2]) end
  redis.call('SET', bl, redis.call('ZCARD', p .. 'pending') .. ' ' .. string.format('%d', late), 'EX', 90000)
end
local due = redis.call('ZRANGEBYSCORE', p .. 'pending', '-inf', now, 'LIMIT', 0, max)
local out = {now, 0}
local n = 0
for _, id in ipairs(due) do
  local k = p .. 'job:' .. id
  redis.call('ZREM', p .. 'pending', id)
  local f = redis.call('HMGET', k, 'deadline', 'payload', 'kind', 'error')
  -- HINCRBY would re-create a missing hash: skip the orphaned entry instead.
  if f[1] and f[2] then
    local attempt = redis.call('HINCRBY', k, 'attempt', 1)
    local tok = ARGV[3 + n]
    local lease_until = now + lease
    redis.call('HSET', k, 'state', 'l', 'token', tok, 'lease_until', lease_until)
    redis.call('ZADD', p .. 'leased', lease_until, id)
    table.insert(out, tonumber(id))
    table.insert(out, attempt)
    table.insert(out, tok)
    table.insert(out, lease_until)
    table.insert(out, f[1])
    table.insert(out, f[2])
    table.insert(out, f[3] or '')
    table.insert(out, f[4] or '')
    n = n + 1
  end
end
out[2] = n
if n == 0 then
  local a = redis.call('ZRANGE', p .. 'pending', 0, 0, 'WITHSCORES')
  local b = redis.call('ZRANGE', p .. 'leased', 0, 0, 'WITHSCORES')
  local nxt = -1
  if a[2] then nxt = tonumber(a[2]) end
  if b[2] and (nxt < 0 or tonumber(b[2]) < nxt) then nxt = tonumber(b[2]) end
  table.insert(out, nxt)
end
table.insert(out, ended)
table.insert(out, redis.call('ZCARD', p .. 'pending'))
table.insert(out, redis.call('ZCARD', p .. 'leased'))
table.insert(out, redis.call('ZCARD', p .. 'dead'))
return out
"#;

/// ARGV: nonce, nonce TTL, id, token. Deletes the job if the token is its
/// current one.
const ACK: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local k = p .. 'job:' .. ARGV[3]
local r = 0
local f = redis.call('HMGET', k, 'token', 'state', 'kind')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  redis.call('DEL', k)
  unlink(ARGV[3])
  tally(f[3], 'ok')
  r = 1
end
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, n, then n pairs (id, token). `ACK` for each; the
/// flags in order.
const ACK_MANY: &str = r#"
local c = cached(ARGV[1])
if c then return cjson.decode(c) end
local out = {}
for i = 1, tonumber(ARGV[3]) do
  local id = ARGV[2 + 2 * i]
  local k = p .. 'job:' .. id
  local f = redis.call('HMGET', k, 'token', 'state', 'kind')
  out[i] = 0
  if f[1] and f[1] ~= '0' and f[1] == ARGV[3 + 2 * i] and f[2] ~= 'd' then
    redis.call('DEL', k)
    unlink(id)
    tally(f[3], 'ok')
    out[i] = 1
  end
end
remember(ARGV[1], cjson.encode(out))
return out
"#;

/// ARGV: nonce, nonce TTL, id, token, due time (as `due` reads it), error
/// (`""`: keep the job's last error). Retry then, or dead after the last
/// attempt.
const NACK: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local id = ARGV[3]
local k = p .. 'job:' .. id
local r = 0
local f = redis.call('HMGET', k, 'token', 'state', 'attempt', 'dead_after', 'kind')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  unlink(id)
  tally(f[5], 'fail')
  if ARGV[6] ~= '' then redis.call('HSET', k, 'error', ARGV[6]) end
  if tonumber(f[3]) >= tonumber(f[4]) then
    redis.call('HSET', k, 'state', 'd', 'token', 0)
    redis.call('ZADD', p .. 'dead', now, id)
  else
    local at = due(ARGV[5])
    if at < 0 then at = 0 end
    redis.call('HSET', k, 'state', 'p', 'token', 0, 'deadline', at)
    redis.call('ZADD', p .. 'pending', at, id)
    redis.call('PUBLISH', p .. 'wake', at)
  end
  r = 1
end
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, id, token, error. The job to the dead set now,
/// whatever attempts it has left, with `error` as its last error.
const KILL: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local id = ARGV[3]
local k = p .. 'job:' .. id
local r = 0
local f = redis.call('HMGET', k, 'token', 'state', 'kind')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  unlink(id)
  tally(f[3], 'fail')
  redis.call('HSET', k, 'state', 'd', 'token', 0, 'error', ARGV[5])
  redis.call('ZADD', p .. 'dead', now, id)
  r = 1
end
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, id, token, lease µs. The lease ends `lease` from now.
const EXTEND: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local id = ARGV[3]
local k = p .. 'job:' .. id
local r = 0
local f = redis.call('HMGET', k, 'token', 'state')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  local lease_until = now + tonumber(ARGV[5])
  redis.call('ZREM', p .. 'pending', id)
  redis.call('HSET', k, 'state', 'l', 'lease_until', lease_until)
  redis.call('ZADD', p .. 'leased', lease_until, id)
  r = 1
end
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, id. Deletes the job in any state.
const CANCEL: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local r = redis.call('DEL', p .. 'job:' .. ARGV[3])
unlink(ARGV[3])
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, id, due time (as `due` reads it), max_attempts. A
/// dead job back to pending.
const REQUEUE: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local id = ARGV[3]
local k = p .. 'job:' .. id
local r = 0
if redis.call('HGET', k, 'state') == 'd' then
  local at = due(ARGV[4])
  if at < 0 then at = 0 end
  local attempt = tonumber(redis.call('HGET', k, 'attempt'))
  redis.call('ZREM', p .. 'dead', id)
  redis.call('HSET', k, 'state', 'p', 'token', 0, 'deadline', at, 'dead_after', attempt + tonumber(ARGV[5]))
  redis.call('ZADD', p .. 'pending', at, id)
  redis.call('PUBLISH', p .. 'wake', at)
  r = 1
end
remember(ARGV[1], r)
return r
"#;

/// Returns `{now, pending, leased, dead}`.
const STATS: &str = r#"
return {now, redis.call('ZCARD', p .. 'pending'), redis.call('ZCARD', p .. 'leased'), redis.call('ZCARD', p .. 'dead')}
"#;

/// ARGV: the last index to list (limit − 1). Returns `{now, ...}`, six fields per dead job (id, attempt,
/// deadline, payload, kind, error — the last two `""` when absent), oldest death first; an entry without its hash is
/// dropped from the set and not listed.
const DEAD: &str = r#"
local out = {now}
for _, id in ipairs(redis.call('ZRANGE', p .. 'dead', 0, ARGV[1])) do
  local f = redis.call('HMGET', p .. 'job:' .. id, 'attempt', 'deadline', 'payload', 'kind', 'error')
  if f[1] and f[2] and f[3] then
    table.insert(out, tonumber(id))
    table.insert(out, tonumber(f[1]))
    table.insert(out, f[2])
    table.insert(out, f[3])
    table.insert(out, f[4] or '')
    table.insert(out, f[5] or '')
  else
    redis.call('ZREM', p .. 'dead', id)
  end
end
return out
"#;

/// ARGV: nonce, nonce TTL, the state letters a job may be in (`pd`…), n,
/// then n ids. Deletes each job only in one of those states (the
/// inspection API's guarded delete); the flags in order. The client sends
/// at most [`MAX_BATCH`](super::MAX_BATCH) ids a call.
const CANCEL_IN: &str = r#"
local c = cached(ARGV[1])
if c then return cjson.decode(c) end
local out = {}
for i = 1, tonumber(ARGV[4]) do
  local id = ARGV[4 + i]
  local s = redis.call('HGET', p .. 'job:' .. id, 'state')
  out[i] = 0
  if s and string.find(ARGV[3], s, 1, true) then
    out[i] = redis.call('DEL', p .. 'job:' .. id)
    unlink(id)
  end
end
remember(ARGV[1], cjson.encode(out))
return out
"#;

/// ARGV: nonce, nonce TTL, due time (as `due` reads it), max_attempts, n, then n ids. `REQUEUE`
/// for each (a dead job back to pending); the flags in order. At most
/// [`MAX_BATCH`](super::MAX_BATCH) ids a call.
const REQUEUE_MANY: &str = r#"
local c = cached(ARGV[1])
if c then return cjson.decode(c) end
local at = due(ARGV[3])
if at < 0 then at = 0 end
local out = {}
local any = false
for i = 1, tonumber(ARGV[5]) do
  local id = ARGV[5 + i]
  local k = p .. 'job:' .. id
  out[i] = 0
  if redis.call('HGET', k, 'state') == 'd' then
    local attempt = tonumber(redis.call('HGET', k, 'attempt'))
    redis.call('ZREM', p .. 'dead', id)
    redis.call('HSET', k, 'state', 'p', 'token', 0, 'deadline', at, 'dead_after', attempt + tonumber(ARGV[4]))
    redis.call('ZADD', p .. 'pending', at, id)
    out[i] = 1
    any = true
  end
end
if any then redis.call('PUBLISH', p .. 'wake', at) end
remember(ARGV[1], cjson.encode(out))
return out
"#;

/// The inspection API's read (`inspect.rs`), bounded: ARGV `set`, a set name
/// (`pending`, `leased` or `dead`), the first index to read, how many
/// entries to read at most, how many jobs to return at most, `1` to keep one
/// kind only (`0`: any) and that kind, and text the last error must contain
/// (lower case, `""`: any); or `job` and an id. Returns `{now, next, ...}`:
/// `next` the index to read on from (-1: the set's end), then nine fields
/// per job (id, state, attempt, deadline, payload, kind, error, lease_until,
/// its score in the set: the time of death for a dead job — absent ones
/// `""`), in the set's order (due time, lease end, time of death). Changes
/// nothing: an entry without its hash is skipped, not removed. The client
/// reads at most [`MAX_BATCH`](super::MAX_BATCH) entries a call, so no call
/// holds the server for long, whatever the listing's length.
const INSPECT: &str = r#"
local ids
local out = {now, -1}
if ARGV[1] == 'job' then
  ids = {ARGV[2], redis.call('ZSCORE', p .. 'dead', ARGV[2]) or ''}
else
  local start = tonumber(ARGV[3])
  local budget = tonumber(ARGV[4])
  ids = redis.call('ZRANGE', p .. ARGV[2], start, start + budget - 1, 'WITHSCORES')
  if #ids == 2 * budget then out[2] = start + budget end
end
local limit = tonumber(ARGV[5] or '1')
local one_kind = ARGV[6] == '1'
local needle = ARGV[8] or ''
local n = 0
for i = 1, #ids, 2 do
  if n >= limit then
    out[2] = tonumber(ARGV[3]) + (i - 1) / 2
    break
  end
  local id = ids[i]
  local f = redis.call('HMGET', p .. 'job:' .. id, 'state', 'attempt', 'deadline', 'payload', 'kind', 'error', 'lease_until')
  if f[1] and f[2] and f[3] and f[4] then
    local kind = f[5] or ''
    local err = f[6] or ''
    if (not one_kind or kind == ARGV[7]) and (needle == '' or string.find(string.lower(err), needle, 1, true)) then
      table.insert(out, tonumber(id))
      for j = 1, 7 do table.insert(out, f[j] or '') end
      table.insert(out, ids[i + 1])
      n = n + 1
    end
  end
end
return out
"#;

/// Counts by kind, bounded: ARGV a set name, the first index, how many
/// entries to read at most. Returns `{next, kind, count, kind, count, ...}`
/// for the entries read (`next` -1 at the set's end). Changes nothing.
const KINDS: &str = r#"
local start = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', p .. ARGV[1], start, start + budget - 1)
local counts = {}
for _, id in ipairs(ids) do
  local k = redis.call('HGET', p .. 'job:' .. id, 'kind')
  if k ~= false then counts[k] = (counts[k] or 0) + 1 end
end
local out = {-1}
if #ids == budget then out[1] = start + budget end
for k, n in pairs(counts) do
  table.insert(out, k)
  table.insert(out, n)
end
return out
"#;

/// The throughput read: ARGV how many minutes, up to the server's current
/// one (the client asks for at most 1,441). Returns `{minute, field, count,
/// …}` (minutes since the epoch) for every field of those minutes' `tp:`
/// hashes (`ok:<kind>`, `fail:<kind>`). Changes nothing.
const THROUGHPUT: &str = r#"
local out = {}
local last = math.floor(now / 60000000)
for m = last - tonumber(ARGV[1]) + 1, last do
  local h = redis.call('HGETALL', p .. 'tp:' .. m)
  for i = 1, #h, 2 do
    table.insert(out, m)
    table.insert(out, h[i])
    table.insert(out, h[i + 1])
  end
end
return out
"#;

/// The backlog samples' read: ARGV how many minutes, up to the server's
/// current one (the client asks for at most 1,441). Returns `{minute,
/// sample, …}` (minutes since the epoch; the `bl:` string) for the minutes
/// that have one. Changes nothing.
const SAMPLES: &str = r#"
local out = {}
local last = math.floor(now / 60000000)
for m = last - tonumber(ARGV[1]) + 1, last do
  local v = redis.call('GET', p .. 'bl:' .. m)
  if v then
    table.insert(out, m)
    table.insert(out, v)
  end
end
return out
"#;

/// Which script: its label on the latency histogram
/// (`delayq_durable_redis_script_seconds{script}`), and its slot in
/// [`Scripts::get`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
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
    Inspect,
    CancelIn,
    RequeueMany,
    Kinds,
    Throughput,
    Samples,
}

impl Name {
    /// Every script, in `as usize` order.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [Name; 17] = [
        Name::Send,
        Name::Reserve,
        Name::Ack,
        Name::AckMany,
        Name::Nack,
        Name::Kill,
        Name::Extend,
        Name::Cancel,
        Name::Requeue,
        Name::Stats,
        Name::Dead,
        Name::Inspect,
        Name::CancelIn,
        Name::RequeueMany,
        Name::Kinds,
        Name::Throughput,
        Name::Samples,
    ];

    /// The `script` label.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn label(self) -> &'static str {
        match self {
            Name::Send => "send",
            Name::Reserve => "reserve",
            Name::Ack => "ack",
            Name::AckMany => "ack_many",
            Name::Nack => "nack",
            Name::Kill => "kill",
            Name::Extend => "extend",
            Name::Cancel => "cancel",
            Name::Requeue => "requeue",
            Name::Stats => "stats",
            Name::Dead => "dead",
            Name::Inspect => "inspect",
            Name::CancelIn => "cancel_in",
            Name::RequeueMany => "requeue_many",
            Name::Kinds => "kinds",
            Name::Throughput => "throughput",
            Name::Samples => "samples",
        }
    }
}

/// The compiled scripts (each is loaded by hash, sent in full once per
/// connection if the server does not have it).
pub(crate) struct Scripts {
    pub(crate) send: redis::Script,
    pub(crate) reserve: redis::Script,
    pub(crate) ack: redis::Script,
    pub(crate) ack_many: redis::Script,
    pub(crate) nack: redis::Script,
    pub(crate) kill: redis::Script,
    pub(crate) extend: redis::Script,
    pub(crate) cancel: redis::Script,
    pub(crate) requeue: redis::Script,
    pub(crate) stats: redis::Script,
    pub(crate) dead: redis::Script,
    pub(crate) inspect: redis::Script,
    pub(crate) cancel_in: redis::Script,
    pub(crate) requeue_many: redis::Script,
    pub(crate) kinds: redis::Script,
    pub(crate) throughput: redis::Script,
    pub(crate) samples: redis::Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        let s = |body: &str| redis::Script::new(&format!("{PROLOGUE}{body}"));
        Scripts {
            send: s(SEND),
            reserve: s(RESERVE),
            ack: s(ACK),
            ack_many: s(ACK_MANY),
            nack: s(NACK),
            kill: s(KILL),
            extend: s(EXTEND),
            cancel: s(CANCEL),
            requeue: s(REQUEUE),
            stats: s(STATS),
            dead: s(DEAD),
            inspect: s(INSPECT),
            cancel_in: s(CANCEL_IN),
            requeue_many: s(REQUEUE_MANY),
            kinds: s(KINDS),
            throughput: s(THROUGHPUT),
            samples: s(SAMPLES),
        }
    }

    /// The script `name`.
    pub(crate) fn get(&self, name: Name) -> &redis::Script {
        match name {
            Name::Send => &self.send,
            Name::Reserve => &self.reserve,
            Name::Ack => &self.ack,
            Name::AckMany => &self.ack_many,
            Name::Nack => &self.nack,
            Name::Kill => &self.kill,
            Name::Extend => &self.extend,
            Name::Cancel => &self.cancel,
            Name::Requeue => &self.requeue,
            Name::Stats => &self.stats,
            Name::Dead => &self.dead,
            Name::Inspect => &self.inspect,
            Name::CancelIn => &self.cancel_in,
            Name::RequeueMany => &self.requeue_many,
            Name::Kinds => &self.kinds,
            Name::Throughput => &self.throughput,
            Name::Samples => &self.samples,
        }
    }
}
