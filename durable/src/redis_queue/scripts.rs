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
//! | `job:<id>` | hash | `payload`, `kind` (absent or `""`: none), `error` (the last error; absent: none), `deadline` (µs), `attempt`, `dead_after`, `token` (decimal; `0`: none), `lease_until` (µs), `state` (`p` pending, `l` leased, `d` dead), `priority` (absent: 0), `ukey`/`ustates`/`uuntil` (its uniqueness key, as `uniq` holds it) |
//! | `pending` | zset | pending jobs by due time (µs since the Unix epoch, server clock) |
//! | `pq:<priority>` | zset | pending jobs of that priority (`0`..`9`) by due time; members are ids zero-padded to 20 digits, so equal due times order by id |
//! | `pk:<priority>:<kind>` | zset | the same, per (priority, kind) (what `reserve_excluding` reads) |
//! | `pks` | set | the `<priority>:<kind>` pairs with a `pk:` set |
//! | `rl` | hash | rate limits: kind → `"<n> <per µs>"` (at most n leases of the kind per `per`) |
//! | `rb` | hash | a limited kind's token bucket: kind → `"<tokens> <last>"`, whole tokens and the time (µs, server clock, fractional) the refill counts from; absent: full |
//! | `uniq` | hash | uniqueness key → `"<id> <states> <until>"` (states `p`, `l`, `b`; until: µs, 0 without a period) |
//! | `uexp` | zset | the uniqueness keys with a period, by its end (the sweep's order) |
//! | `sc:<name>` | hash | a schedule: `def`, `next` (µs, client clock; absent: paused), `last`, `tick` (its pending tick job's id) |
//! | `scheds` | set | the schedules' names |
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

use crate::stored::TICK_KIND;

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
-- A job id as a member of the per-priority sets: zero-padded to 20
-- digits, so that equal due times order by id (send order), not as text.
local function pad(id)
  id = tostring(id)
  return string.rep('0', 20 - #id) .. id
end
local function unpad(m)
  return (string.gsub(m, '^0+', ''))
end
-- Indexes a pending job: `pending` (all, by due time), `pq:<priority>`
-- and `pk:<priority>:<kind>` (by due time, then id), and the pair in `pks`.
local function pend(id, at, prio, kind)
  redis.call('ZADD', p .. 'pending', at, id)
  local m = pad(id)
  redis.call('ZADD', p .. 'pq:' .. prio, at, m)
  local pair = prio .. ':' .. kind
  redis.call('ZADD', p .. 'pk:' .. pair, at, m)
  redis.call('SADD', p .. 'pks', pair)
end
local function unpend(id, prio, kind)
  redis.call('ZREM', p .. 'pending', id)
  local m = pad(id)
  redis.call('ZREM', p .. 'pq:' .. prio, m)
  local pair = prio .. ':' .. kind
  if redis.call('ZREM', p .. 'pk:' .. pair, m) == 1 and redis.call('EXISTS', p .. 'pk:' .. pair) == 0 then
    redis.call('SREM', p .. 'pks', pair)
  end
end
-- A job's priority (absent: 0, a job from before priorities) and kind.
local function prio_kind(id)
  local f = redis.call('HMGET', p .. 'job:' .. id, 'priority', 'kind')
  return tonumber(f[1] or '0') or 0, f[2] or ''
end
-- Out of every set (call it while the job's hash still exists).
local function unlink(id)
  local prio, kind = prio_kind(id)
  unpend(id, prio, kind)
  redis.call('ZREM', p .. 'leased', id)
  redis.call('ZREM', p .. 'dead', id)
end
-- Uniqueness: `uniq` maps a key to "<id> <states> <until>" (states `p`,
-- `l` or `b`; until: µs, 0 without a period); `uexp` holds the keys with
-- a period by its end, for the sweep.
local function covers(st, state)
  if state == 'p' then return st ~= 'l' end
  if state == 'l' then return st ~= 'p' end
  return false
end
local function uparse(v)
  local id, st, untl = string.match(v, '^(%d+) (%a) (%d+)$')
  return id, st, tonumber(untl or '0')
end
-- The id of the job that holds a key whose entry is `v`, or nil.
local function holder(v)
  local id, st, untl = uparse(v)
  if not id then return nil end
  if untl > now then return id end
  local state = redis.call('HGET', p .. 'job:' .. id, 'state')
  if state and covers(st, state) then return id end
  return nil
end
-- A job deleted or dead: its key's entry goes, unless its period runs on
-- (the sweep takes it then).
local function release(id)
  local key = redis.call('HGET', p .. 'job:' .. id, 'ukey')
  if not key then return end
  local v = redis.call('HGET', p .. 'uniq', key)
  if not v then return end
  local hid, _, untl = uparse(v)
  if hid == tostring(id) and untl <= now then
    redis.call('HDEL', p .. 'uniq', key)
    redis.call('ZREM', p .. 'uexp', key)
  end
end
-- A dead job pending again holds its key again, if no other job took it.
local function adopt(id)
  local f = redis.call('HMGET', p .. 'job:' .. id, 'ukey', 'ustates', 'uuntil')
  if f[1] and f[2] and f[3] and redis.call('HEXISTS', p .. 'uniq', f[1]) == 0 then
    redis.call('HSET', p .. 'uniq', f[1], id .. ' ' .. f[2] .. ' ' .. f[3])
  end
end
-- Stores a pending job; returns its id.
local function create(at, kind, payload, prio, ma)
  local id = redis.call('INCR', p .. 'seq')
  local k = p .. 'job:' .. id
  redis.call('HSET', k, 'payload', payload, 'kind', kind, 'deadline', at,
    'attempt', 0, 'dead_after', ma, 'token', 0, 'lease_until', 0, 'state', 'p')
  if prio ~= 0 then redis.call('HSET', k, 'priority', prio) end
  pend(id, at, prio, kind)
  return id
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
  local id = create(at, ARGV[3 + 3 * i], ARGV[4 + 3 * i], 0, ma)
  ids[i] = id
  if earliest == nil or at < earliest then earliest = at end
end
remember(ARGV[1], cjson.encode(ids))
redis.call('PUBLISH', p .. 'wake', earliest)
return ids
"#;

/// ARGV: nonce, nonce TTL, max_attempts, due time (as `due` reads it), kind,
/// payload, priority, uniqueness key (`""`: none), covered states (`p`, `l`
/// or `b`), period µs (0: none). With a key: first sweeps up to 20 entries
/// whose period ran out (each dropped unless its job still holds the key by
/// state), then returns `{0, id}` if a job holds the key. Otherwise stores
/// the job, which now holds the key, and returns `{1, id}`.
const SEND_WITH: &str = r#"
local c = cached(ARGV[1])
if c then return cjson.decode(c) end
local key = ARGV[8]
local out = nil
if key ~= '' then
  for _, old in ipairs(redis.call('ZRANGEBYSCORE', p .. 'uexp', '-inf', now, 'LIMIT', 0, 20)) do
    redis.call('ZREM', p .. 'uexp', old)
    local v = redis.call('HGET', p .. 'uniq', old)
    if v and not holder(v) then redis.call('HDEL', p .. 'uniq', old) end
  end
  local v = redis.call('HGET', p .. 'uniq', key)
  local id = v and holder(v)
  if id then out = {0, tonumber(id)} end
end
if not out then
  local at = due(ARGV[4])
  if at < 0 then at = 0 end
  local id = create(at, ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[3]))
  if key ~= '' then
    local untl = 0
    if tonumber(ARGV[10]) > 0 then untl = now + tonumber(ARGV[10]) end
    local u = string.format('%d', untl)
    redis.call('HSET', p .. 'job:' .. id, 'ukey', key, 'ustates', ARGV[9], 'uuntil', u)
    redis.call('HSET', p .. 'uniq', key, id .. ' ' .. ARGV[9] .. ' ' .. u)
    if untl > 0 then
      redis.call('ZADD', p .. 'uexp', untl, key)
    else
      redis.call('ZREM', p .. 'uexp', key)
    end
  end
  redis.call('PUBLISH', p .. 'wake', at)
  out = {1, id}
end
remember(ARGV[1], cjson.encode(out))
return out
"#;

/// ARGV: lease µs, max jobs, aging step µs (0: no aging), mode (`""`: any
/// kind; `x`: excluding kinds), n, then n excluded kinds, then `max` lease
/// tokens (the n-th job leased gets the n-th). First ends expired leases (up
/// to 100): each job is due again at its lease end, or dead after its last
/// attempt. Then leases up to `max` due jobs, best first: the lowest
/// effective priority (its priority less one per aging step it has been due,
/// not below 0), then the earliest due time, then the lowest id. Each
/// priority set's head (`pq:<p>`, or in mode `x` each `pk:<p>:<kind>` of a
/// kind not excluded) is the best of its set, so the best due job is the
/// best of those heads: exact, in O(sets · log n) a job. If the priority
/// sets do not count as many jobs as `pending` (a queue written before
/// them), they are rebuilt from `pending` first (once, O(n)).
///
/// Rate limits (`rl`): with any kind limited, the script reads the
/// (priority, kind) sets in both modes, and a head of a limited kind is
/// leased only if the kind's bucket (`rb`, refilled from `TIME` first: one
/// token per `per / n` since its last refill, at most n) holds a whole
/// token, which the lease takes. A kind without one is skipped as an
/// excluded kind is (its jobs stay pending, their attempt uncounted); with
/// nothing leased, its next due time counts as no earlier than its next
/// token's time, so a waiting consumer sleeps exactly until then.
///
/// An entry without its job hash is dropped and skipped (so a reply may
/// carry fewer jobs than were due; the next due time is then at most now,
/// and the client asks again at once). Returns `{now, n, ...}`: with n > 0,
/// nine fields per job (id, attempt, token, lease_until, deadline, payload,
/// kind, error — the last two `""` when absent —, priority); with n = 0, the
/// next due time (a pending deadline of a kind not excluded, or a lease
/// end), or -1 if none. Then, last, four counts for the client's metrics:
/// the expired leases acted on (the job due again or dead; an entry without
/// its hash is not counted), and the jobs pending, leased and dead after the
/// script (`ZCARD`s, O(1) each).
const RESERVE: &str = r#"
local lease = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local step = tonumber(ARGV[3])
local nx = tonumber(ARGV[5])
local tokens = 5 + nx
local expired = redis.call('ZRANGEBYSCORE', p .. 'leased', '-inf', now, 'LIMIT', 0, 100)
local ended = 0
for _, id in ipairs(expired) do
  local k = p .. 'job:' .. id
  redis.call('ZREM', p .. 'leased', id)
  local f = redis.call('HMGET', k, 'attempt', 'dead_after', 'lease_until', 'kind', 'priority')
  if not f[1] or not f[2] or not f[3] then
    -- The hash is gone: nothing to redeliver.
  elseif tonumber(f[1]) >= tonumber(f[2]) then
    redis.call('HSET', k, 'state', 'd', 'token', 0, 'error', 'lease expired (attempt ' .. f[1] .. ')')
    redis.call('ZADD', p .. 'dead', now, id)
    release(id)
    tally(f[4], 'fail')
    ended = ended + 1
  else
    -- Due again; the token stays, so a late ack still counts until the job
    -- is leased to someone else. Why it came back is its last error.
    redis.call('HSET', k, 'state', 'p', 'error', 'lease expired (attempt ' .. f[1] .. ')')
    pend(id, tonumber(f[3]), tonumber(f[5] or '0') or 0, f[4] or '')
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
-- Rebuild the priority sets if they do not hold what `pending` holds.
local indexed = 0
for l = 0, 9 do indexed = indexed + redis.call('ZCARD', p .. 'pq:' .. l) end
if indexed ~= redis.call('ZCARD', p .. 'pending') then
  for l = 0, 9 do redis.call('DEL', p .. 'pq:' .. l) end
  for _, pair in ipairs(redis.call('SMEMBERS', p .. 'pks')) do redis.call('DEL', p .. 'pk:' .. pair) end
  redis.call('DEL', p .. 'pks')
  local all = redis.call('ZRANGE', p .. 'pending', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local id = all[i]
    if redis.call('EXISTS', p .. 'job:' .. id) == 1 then
      local prio, kind = prio_kind(id)
      pend(id, tonumber(all[i + 1]), prio, kind)
    else
      redis.call('ZREM', p .. 'pending', id)
    end
  end
end
-- Rate limits: kind -> {n, iv} (iv: µs per token, fractional).
local limits = {}
local limited = false
do
  local all = redis.call('HGETALL', p .. 'rl')
  for i = 1, #all, 2 do
    local n, per = string.match(all[i + 1], '^(%d+) (%d+)$')
    if n and tonumber(n) > 0 then
      limits[all[i]] = {tonumber(n), tonumber(per) / tonumber(n)}
      limited = true
    end
  end
end
-- A limited kind's bucket, refilled to now (read once a script; false for
-- a kind without a limit): {tokens, last, iv, taken}. Whole tokens only:
-- `last` advances by whole intervals, so the fraction carries over.
local buckets = {}
local function bucket(kind)
  local b = buckets[kind]
  if b ~= nil then return b end
  local lim = limits[kind]
  if not lim then
    buckets[kind] = false
    return false
  end
  local n, iv = lim[1], lim[2]
  local tokens, last = n, now
  local v = redis.call('HGET', p .. 'rb', kind)
  if v then
    local t, l = string.match(v, '^(%S+) (%S+)$')
    tokens, last = tonumber(t) or n, tonumber(l) or now
  end
  if last > now then last = now end -- the server's clock went back
  if tokens < n then
    local k = math.floor((now - last) / iv)
    if last + (k + 1) * iv <= now then k = k + 1 end
    tokens = tokens + k
    last = last + k * iv
  end
  if tokens >= n then tokens, last = n, now end
  b = {tokens, last, iv, false}
  buckets[kind] = b
  return b
end
-- Whether a kind is limited and out of tokens.
local function dry(kind)
  if not kind then return false end
  local b = bucket(kind)
  return b and b[1] < 1
end
-- The sets to take from, each with its priority (and, per kind, its kind).
local sets = {}
if ARGV[4] == 'x' or limited then
  local skip = {}
  if ARGV[4] == 'x' then
    for i = 1, nx do skip[ARGV[5 + i]] = true end
  end
  for _, pair in ipairs(redis.call('SMEMBERS', p .. 'pks')) do
    local kind = string.sub(pair, 3)
    if not skip[kind] then
      table.insert(sets, {p .. 'pk:' .. pair, tonumber(string.sub(pair, 1, 1)), kind})
    end
  end
else
  for l = 0, 9 do table.insert(sets, {p .. 'pq:' .. l, l}) end
end
local heads = {}
local function look(i)
  local h = redis.call('ZRANGE', sets[i][1], 0, 0, 'WITHSCORES')
  if h[1] then heads[i] = {h[1], tonumber(h[2])} else heads[i] = false end
end
for i = 1, #sets do look(i) end
local function effective(prio, at)
  if step <= 0 then return prio end
  local e = prio - math.floor((now - at) / step)
  if e < 0 then e = 0 end
  return e
end
local function best()
  local bi, be, ba, bm = nil, 0, 0, ''
  for i = 1, #sets do
    local h = heads[i]
    if h and h[2] <= now and not dry(sets[i][3]) then
      local e = effective(sets[i][2], h[2])
      if not bi or e < be or (e == be and (h[2] < ba or (h[2] == ba and h[1] < bm))) then
        bi, be, ba, bm = i, e, h[2], h[1]
      end
    end
  end
  return bi
end
local out = {now, 0}
local n = 0
while n < max do
  local i = best()
  if not i then break end
  local m = heads[i][1]
  local id = unpad(m)
  local k = p .. 'job:' .. id
  local f = redis.call('HMGET', k, 'deadline', 'payload', 'kind', 'error', 'priority', 'state')
  if f[1] and f[2] and f[6] == 'p' then
    local prio = tonumber(f[5] or '0') or 0
    unpend(id, prio, f[3] or '')
    local b = bucket(f[3] or '')
    if b then
      b[1] = b[1] - 1
      b[4] = true
    end
    local attempt = redis.call('HINCRBY', k, 'attempt', 1)
    local tok = ARGV[tokens + 1 + n]
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
    table.insert(out, prio)
    n = n + 1
  elseif not f[1] then
    -- The hash is gone (HINCRBY would re-create it): drop the entry.
    redis.call('ZREM', p .. 'pending', id)
    redis.call('ZREM', p .. 'pq:' .. sets[i][2], m)
  end
  -- Normally gone already; a stale or orphaned entry must not come again.
  redis.call('ZREM', sets[i][1], m)
  look(i)
end
out[2] = n
for kind, b in pairs(buckets) do
  if b and b[4] then
    redis.call('HSET', p .. 'rb', kind, string.format('%d %.17g', b[1], b[2]))
  end
end
if n == 0 then
  local nxt = -1
  for i = 1, #sets do
    local h = heads[i]
    if h then
      local at = h[2]
      -- A kind out of tokens: not before its next token.
      if dry(sets[i][3]) then
        local b = buckets[sets[i][3]]
        local ready = math.ceil(b[2] + b[3])
        if ready > at then at = ready end
      end
      if nxt < 0 or at < nxt then nxt = at end
    end
  end
  local b = redis.call('ZRANGE', p .. 'leased', 0, 0, 'WITHSCORES')
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
  release(ARGV[3])
  unlink(ARGV[3])
  redis.call('DEL', k)
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
    release(id)
    unlink(id)
    redis.call('DEL', k)
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
local f = redis.call('HMGET', k, 'token', 'state', 'attempt', 'dead_after', 'kind', 'priority')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  unlink(id)
  tally(f[5], 'fail')
  if ARGV[6] ~= '' then redis.call('HSET', k, 'error', ARGV[6]) end
  if tonumber(f[3]) >= tonumber(f[4]) then
    redis.call('HSET', k, 'state', 'd', 'token', 0)
    redis.call('ZADD', p .. 'dead', now, id)
    release(id)
  else
    local at = due(ARGV[5])
    if at < 0 then at = 0 end
    redis.call('HSET', k, 'state', 'p', 'token', 0, 'deadline', at)
    pend(id, at, tonumber(f[6] or '0') or 0, f[5] or '')
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
  release(id)
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
local f = redis.call('HMGET', k, 'token', 'state', 'priority', 'kind')
if f[1] and f[1] ~= '0' and f[1] == ARGV[4] and f[2] ~= 'd' then
  local lease_until = now + tonumber(ARGV[5])
  unpend(id, tonumber(f[3] or '0') or 0, f[4] or '')
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
release(ARGV[3])
unlink(ARGV[3])
local r = redis.call('DEL', p .. 'job:' .. ARGV[3])
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
  local prio, kind = prio_kind(id)
  pend(id, at, prio, kind)
  adopt(id)
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

/// ARGV: the last index to list (limit − 1). Returns `{now, ...}`, seven fields per dead job (id, attempt,
/// deadline, payload, kind, error — the last two `""` when absent —, priority), oldest death first; an entry without its hash is
/// dropped from the set and not listed.
const DEAD: &str = r#"
local out = {now}
for _, id in ipairs(redis.call('ZRANGE', p .. 'dead', 0, ARGV[1])) do
  local f = redis.call('HMGET', p .. 'job:' .. id, 'attempt', 'deadline', 'payload', 'kind', 'error', 'priority')
  if f[1] and f[2] and f[3] then
    table.insert(out, tonumber(id))
    table.insert(out, tonumber(f[1]))
    table.insert(out, f[2])
    table.insert(out, f[3])
    table.insert(out, f[4] or '')
    table.insert(out, f[5] or '')
    table.insert(out, tonumber(f[6] or '0') or 0)
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
    release(id)
    unlink(id)
    out[i] = redis.call('DEL', p .. 'job:' .. id)
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
    local prio, kind = prio_kind(id)
    pend(id, at, prio, kind)
    adopt(id)
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
/// `next` the index to read on from (-1: the set's end), then ten fields
/// per job (id, state, attempt, deadline, payload, kind, error, lease_until,
/// its score in the set: the time of death for a dead job — absent ones
/// `""` —, priority: 0 when absent), in the set's order (due time, lease end, time of death). Changes
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
  local f = redis.call('HMGET', p .. 'job:' .. id, 'state', 'attempt', 'deadline', 'payload', 'kind', 'error', 'lease_until', 'priority')
  if f[1] and f[2] and f[3] and f[4] then
    local kind = f[5] or ''
    local err = f[6] or ''
    if (not one_kind or kind == ARGV[7]) and (needle == '' or string.find(string.lower(err), needle, 1, true)) then
      table.insert(out, tonumber(id))
      for j = 1, 7 do table.insert(out, f[j] or '') end
      table.insert(out, ids[i + 1])
      table.insert(out, tonumber(f[8] or '0') or 0)
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

/// Shared by the schedule scripts: `sc:<name>` is a schedule's hash
/// (`def`; `next`, µs on the client's clock, absent while paused; `last`;
/// `tick`, the id of its pending tick job), `scheds` the set of names. A
/// tick job counts as the schedule's only while it is pending and is still
/// the job it was (kind `TICK`, payload the name: ids start again after a
/// data loss).
const SCHEDULES: &str = r#"
local function tick_of(sk, name)
  local t = redis.call('HGET', sk, 'tick')
  if not t then return nil end
  local f = redis.call('HMGET', p .. 'job:' .. t, 'state', 'kind', 'payload')
  if f[1] == 'p' and f[2] == TICK and f[3] == name then return t end
  return nil
end
local function drop_tick(sk, name)
  local t = tick_of(sk, name)
  if t then
    unlink(t)
    redis.call('DEL', p .. 'job:' .. t)
  end
  redis.call('HDEL', sk, 'tick')
end
local function new_tick(sk, name, at, ma)
  if at < 0 then at = 0 end
  local id = create(at, TICK, name, 0, ma)
  redis.call('HSET', sk, 'tick', id)
  redis.call('PUBLISH', p .. 'wake', at)
end
"#;

/// ARGV: nonce, nonce TTL, name, def, next (`""`: paused), the tick job's
/// due time (as `due` reads it), max_attempts. Creates or replaces the
/// schedule (its last tick kept), deletes its pending tick job and stores a
/// new one due at the next tick unless paused. Returns 1.
const SCHED_STORE: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local name = ARGV[3]
local sk = p .. 'sc:' .. name
drop_tick(sk, name)
redis.call('HSET', sk, 'def', ARGV[4])
if ARGV[5] == '' then
  redis.call('HDEL', sk, 'next')
else
  redis.call('HSET', sk, 'next', ARGV[5])
  new_tick(sk, name, due(ARGV[6]), tonumber(ARGV[7]))
end
redis.call('SADD', p .. 'scheds', name)
remember(ARGV[1], 1)
return 1
"#;

/// ARGV: nonce, nonce TTL, name. Deletes the schedule and its pending tick
/// job; 0 if there was none.
const SCHED_REMOVE: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local name = ARGV[3]
local sk = p .. 'sc:' .. name
local r = 0
if redis.call('EXISTS', sk) == 1 then
  drop_tick(sk, name)
  redis.call('DEL', sk)
  r = 1
end
redis.call('SREM', p .. 'scheds', name)
remember(ARGV[1], r)
return r
"#;

/// ARGV: nonce, nonce TTL, name, expected next, new next, new last, the new
/// tick job's due time (as `due` reads it), the offset server − client (µs,
/// for a tick job due at the stored next), kind, payload, priority,
/// max_attempts, n, then n due times. If the schedule exists, is not paused
/// and its next is the expected one: stores the n jobs, moves next and last,
/// replaces the pending tick job (returns 1). Otherwise, if it exists, is
/// not paused and has no pending tick job, stores one due at its next
/// (returns 0).
const SCHED_FIRE: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local name = ARGV[3]
local sk = p .. 'sc:' .. name
local r = 0
local nr = redis.call('HGET', sk, 'next')
local ma = tonumber(ARGV[12])
if nr and nr == ARGV[4] then
  local earliest = nil
  for i = 1, tonumber(ARGV[13]) do
    local at = due(ARGV[13 + i])
    if at < 0 then at = 0 end
    create(at, ARGV[9], ARGV[10], tonumber(ARGV[11]), ma)
    if earliest == nil or at < earliest then earliest = at end
  end
  if earliest then redis.call('PUBLISH', p .. 'wake', earliest) end
  drop_tick(sk, name)
  redis.call('HSET', sk, 'next', ARGV[5], 'last', ARGV[6])
  new_tick(sk, name, due(ARGV[7]), ma)
  r = 1
elseif nr and not tick_of(sk, name) then
  new_tick(sk, name, tonumber(nr) + tonumber(ARGV[8]), ma)
end
remember(ARGV[1], r)
return r
"#;

/// ARGV: a name, or `""` for every schedule. Returns `{name, def, next,
/// last, ...}` (`""` for an absent next or last). Changes nothing.
const SCHED_READ: &str = r#"
local names
if ARGV[1] == '' then names = redis.call('SMEMBERS', p .. 'scheds') else names = {ARGV[1]} end
local out = {}
for _, name in ipairs(names) do
  local f = redis.call('HMGET', p .. 'sc:' .. name, 'def', 'next', 'last')
  if f[1] then
    table.insert(out, name)
    table.insert(out, f[1])
    table.insert(out, f[2] or '')
    table.insert(out, f[3] or '')
  end
end
return out
"#;

/// ARGV: nonce, nonce TTL, kind, n (`""`: clear the kind's limit), per µs.
/// Sets the kind's rate limit with a full bucket, or clears it and its
/// bucket; announces `now` on `wake` either way, so waiting consumers look
/// again at once (the kind's jobs may be free to go). Returns 1, or on a
/// clear 0 if the kind had no limit.
const RATE_LIMIT: &str = r#"
local c = cached(ARGV[1])
if c then return tonumber(c) end
local kind = ARGV[3]
local r = 1
if ARGV[4] == '' then
  r = redis.call('HDEL', p .. 'rl', kind)
else
  redis.call('HSET', p .. 'rl', kind, ARGV[4] .. ' ' .. ARGV[5])
end
redis.call('HDEL', p .. 'rb', kind)
redis.call('PUBLISH', p .. 'wake', now)
remember(ARGV[1], r)
return r
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
    SendWith,
    SchedStore,
    SchedRemove,
    SchedFire,
    SchedRead,
    RateLimit,
}

impl Name {
    /// Every script, in `as usize` order.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [Name; 23] = [
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
        Name::SendWith,
        Name::SchedStore,
        Name::SchedRemove,
        Name::SchedFire,
        Name::SchedRead,
        Name::RateLimit,
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
            Name::SendWith => "send_with",
            Name::SchedStore => "schedule_store",
            Name::SchedRemove => "schedule_remove",
            Name::SchedFire => "schedule_fire",
            Name::SchedRead => "schedule_read",
            Name::RateLimit => "rate_limit",
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
    pub(crate) send_with: redis::Script,
    pub(crate) sched_store: redis::Script,
    pub(crate) sched_remove: redis::Script,
    pub(crate) sched_fire: redis::Script,
    pub(crate) sched_read: redis::Script,
    pub(crate) rate_limit: redis::Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        let s = |body: &str| redis::Script::new(&format!("{PROLOGUE}{body}"));
        // The schedule scripts: their helpers, and the tick jobs' kind.
        let sc = |body: &str| {
            redis::Script::new(&format!("{PROLOGUE}local TICK = '{TICK_KIND}'\n{SCHEDULES}{body}"))
        };
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
            send_with: s(SEND_WITH),
            sched_store: sc(SCHED_STORE),
            sched_remove: sc(SCHED_REMOVE),
            sched_fire: sc(SCHED_FIRE),
            sched_read: s(SCHED_READ),
            rate_limit: s(RATE_LIMIT),
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
            Name::SendWith => &self.send_with,
            Name::SchedStore => &self.sched_store,
            Name::SchedRemove => &self.sched_remove,
            Name::SchedFire => &self.sched_fire,
            Name::SchedRead => &self.sched_read,
            Name::RateLimit => &self.rate_limit,
        }
    }
}
