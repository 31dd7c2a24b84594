// Lua scripts of the usage ledger. Settlement is two single-slot steps, so that it works on Redis
// Cluster as on one Redis: every script touches only the keys it is given in KEYS.
//
// The session step (START, UPSTREAM, USAGE, END, REFUSED, REVERT; KEYS[1] the session hash) applies
// an event to the session hash, idempotently: 'started'/'ended' flags and one 's:<seq>' marker per
// usage message; a replay changes nothing and answers 0. Each change of what the session counts gets a
// new version ('ver'), and what it changed is kept ('undo') so that REVERT can take that change back.
// Every session step answers the session's state (stateReply): the credits it counts (over segments,
// final ?? sum of deltas), its media and speech figures once ended, its version, tenant, endpoint and start.
//
// The tenant step (SETTLE; the tenant's keys, one hash tag) brings the tenant's buckets, indexes,
// credit total and sessions set in line with that state: it adds target − settled for the session,
// only for a version newer than the one it settled last (the 'a:<day>' hash), so re-running it after a
// replay or a crash between the steps is a no-op or completes the settlement. The caller (the usage
// journal) counts an event done only once both steps ran.
//
// Ranges: every script checks its arguments, and every total stays an integer in 0..MAX_TOTAL (exact
// in a double). The session step refuses what is out of range for the session (a figure, a sum); the
// tenant step refuses (-1, writing nothing) a settlement that would take a tenant total out of range,
// and the caller then REVERTs the event on the session and settles what is left: the event is applied
// whole or refused, and a refused one leaves only the 'refused' mark, which makes the session
// estimated.
// Segment n (the session's n-th upstream session) keeps 'usid', 'final' and 'dsum' with the suffix
// ':n'; segment 0 has none, and 'nseg' (absent: 1) bounds the segments to add up.
// A session hash written before settlement was split ('started' without 'gen') had its figures put in
// the buckets by its own script: 'counted', 'mediaCounted' and its start are what the tenant's totals
// already hold of it (the base the state carries).
// A session's speech coverage ('speechMs', 'coveredMs', 'gaps' as flat integers 'start,end,speech,...',
// 'moreGaps') comes with its end and is added to its buckets with its media; what the tenant's totals
// hold of it is kept beside the session's settlement ('c:<key>' in the 'a:<day>' hash), so that a
// settlement by the release before, which knows nothing of it, leaves it as it was.
// Every credit figure is an integer (micro-credits); string.format('%d') keeps Lua from printing large
// numbers in exponent form.
import { MAX_GAPS, MAX_MICRO_PER_MESSAGE, MAX_SEGMENTS, MAX_TOTAL } from './model.js';

const common = `
local MAX_SEGMENTS = ${MAX_SEGMENTS}
local MAX = ${MAX_TOTAL}
local MAX_MESSAGE = ${MAX_MICRO_PER_MESSAGE}
local function fmt(n) return string.format('%d', n) end
-- An integer in lo..hi from an argument, or nil (also for nan, inf and fractions).
local function int(s, lo, hi)
  local n = tonumber(s)
  if not n or n ~= math.floor(n) or n < lo or n > hi then return nil end
  return n
end
local now = int(ARGV[1], 0, MAX)
local retention = int(ARGV[2], 1, MAX)
if not now or not retention then return redis.error_reply('ERR bad clock or retention') end
`;

const session =
  common +
  `
local sk = KEYS[1]
local function field(name, seg)
  if seg == 0 then return name end
  return name .. ':' .. fmt(seg)
end

-- What this event changed: field → its value before (false: absent), for REVERT.
local undo = {}
local function set(f, v)
  if undo[f] == nil then undo[f] = redis.call('HGET', sk, f) end
  redis.call('HSET', sk, f, v)
end

local function nsegs() return tonumber(redis.call('HGET', sk, 'nseg') or '1') end
local function noteSegment(seg)
  if seg + 1 > nsegs() then set('nseg', fmt(seg + 1)) end
end

-- Sum over segments of (final ?? sum of deltas); segment oseg counts oval instead when given.
local function credits(oseg, oval)
  local n = nsegs()
  if oseg and oseg + 1 > n then n = oseg + 1 end
  local sum = 0
  for seg = 0, n - 1 do
    if seg == oseg then
      sum = sum + oval
    else
      local v = redis.call('HMGET', sk, field('final', seg), field('dsum', seg))
      sum = sum + tonumber(v[1] or v[2] or '0')
    end
  end
  return sum
end

local function keepFor()
  local start = redis.call('HGET', sk, 'start')
  if start then redis.call('PEXPIREAT', sk, fmt(tonumber(start) + retention))
  else redis.call('PEXPIRE', sk, fmt(retention)) end
end

-- { status, version, credits, media (0 until ended), tenant, endpoint, start, base micro, base media,
--   base sessions, speech, covered (0 until ended, or without coverage) }
local function stateReply(status)
  local v = redis.call('HMGET', sk, 'tenant', 'endpoint', 'start', 'ver', 'ended', 'mediaMs', 'gen', 'started', 'counted', 'mediaCounted', 'speechMs', 'coveredMs')
  local media, speech, covered = '0', '0', '0'
  if v[5] then media, speech, covered = v[6] or '0', v[11] or '0', v[12] or '0' end
  local base = { '0', '0', '0' }
  if v[8] and not v[7] then base = { v[9] or '0', (v[10] and v[6]) or '0', '1' } end
  return { status, v[4] or '0', fmt(credits()), media, v[1] or '', v[2] or '', v[3] or '', base[1], base[2], base[3], speech, covered }
end

-- The event's changes become the session's next version.
local function commit()
  local ver = tonumber(redis.call('HGET', sk, 'ver') or '0') + 1
  redis.call('HSET', sk, 'ver', fmt(ver), 'undo', cjson.encode({ v = ver, f = undo }))
  keepFor()
  return stateReply(1)
end

-- The event does not fit: nothing of it is written, only the mark that makes the session estimated.
local function refuse()
  redis.call('HSET', sk, 'refused', '1')
  keepFor()
  return stateReply(-1)
end
`;

/** ARGV[3..8]: sessionKey, tenant, endpoint, start, interactionId ('' = none), environment ('' = none). */
export const START =
  session +
  `
if redis.call('HEXISTS', sk, 'started') == 1 then return stateReply(0) end
local key, tenant, endpoint, start, iid, env = ARGV[3], ARGV[4], ARGV[5], int(ARGV[6], 0, MAX), ARGV[7], ARGV[8] or ''
if key == '' or tenant == '' or endpoint == '' or not start then return redis.error_reply('ERR bad start event') end
for _, kv in ipairs({ { 'started', '1' }, { 'gen', '2' }, { 'sessionKey', key }, { 'tenant', tenant }, { 'endpoint', endpoint }, { 'start', fmt(start) } }) do
  set(kv[1], kv[2])
end
if iid ~= '' then set('iid', iid) end
if env ~= '' then set('env', env) end
return commit()
`;

const outOfRange = `return redis.error_reply('ERR segment out of range: ' .. string.sub(ARGV[3], 1, 20))`;

/** ARGV[3..4]: segment, upstream session id. Counts nothing: no new version. */
export const UPSTREAM =
  session +
  `
local seg = int(ARGV[3], 0, MAX_SEGMENTS - 1)
if not seg then ${outOfRange} end
noteSegment(seg)
redis.call('HSET', sk, field('usid', seg), ARGV[4])
keepFor()
return stateReply(1)
`;

/** ARGV[3..6]: segment, seq, kind ('delta'|'final'), micro-credits. */
export const USAGE =
  session +
  `
local seg, seq, kind = int(ARGV[3], 0, MAX_SEGMENTS - 1), int(ARGV[4], -MAX, MAX), ARGV[5]
if not seg then ${outOfRange} end
if not seq or (kind ~= 'delta' and kind ~= 'final') then return redis.error_reply('ERR bad usage event') end
local marker = 's:' .. fmt(seq)
if redis.call('HEXISTS', sk, marker) == 1 then return stateReply(0) end
local micro = int(ARGV[6], 0, MAX_MESSAGE)
if not micro then return refuse() end
local v = redis.call('HMGET', sk, field('final', seg), field('dsum', seg))
local dsum = tonumber(v[2] or '0')
local value = micro
if kind == 'delta' then
  dsum = dsum + micro
  value = tonumber(v[1] or dsum)
end
if dsum > MAX or credits(seg, value) > MAX then return refuse() end
noteSegment(seg)
set(marker, '1')
if kind == 'final' then set(field('final', seg), fmt(micro)) else set(field('dsum', seg), fmt(dsum)) end
return commit()
`;

/** ARGV[3..5]: outcome, mediaMs, endedAt; ARGV[6..9], absent or '' without coverage: speechMs,
 * coveredMs, gaps (flat 'start,end,speech,...', at most MAX_GAPS), moreGaps. Coverage out of range is
 * none: the end counts without it. */
export const END =
  session +
  `
if redis.call('HEXISTS', sk, 'ended') == 1 then return stateReply(0) end
local outcome, mediaMs, at = ARGV[3], int(ARGV[4], 0, MAX), int(ARGV[5], 0, MAX)
if outcome == '' or not mediaMs or not at then return redis.error_reply('ERR bad end event') end
for _, kv in ipairs({ { 'ended', '1' }, { 'outcome', outcome }, { 'mediaMs', fmt(mediaMs) }, { 'end', fmt(at) } }) do
  set(kv[1], kv[2])
end
-- speech, covered (at most the speech), the gaps rewritten from their integers, moreGaps; or nil
local function coverage()
  local speech = int(ARGV[6] or '', 0, MAX)
  if not speech then return nil end
  local covered, more, flat = int(ARGV[7] or '', 0, speech), int(ARGV[9] or '0', 0, MAX), ARGV[8] or ''
  if not covered or not more or #flat > ${MAX_GAPS * 3 * 17} then return nil end
  local n = {}
  for part in string.gmatch(flat, '[^,]+') do
    local x = int(part, 0, MAX)
    if not x then return nil end
    n[#n + 1] = x
  end
  if #n % 3 ~= 0 or #n > ${MAX_GAPS * 3} then return nil end
  for i = 1, #n, 3 do
    if n[i] > n[i + 1] or n[i + 2] > n[i + 1] - n[i] then return nil end
  end
  for i = 1, #n do n[i] = fmt(n[i]) end
  return speech, covered, table.concat(n, ','), more
end
local speech, covered, gaps, more = coverage()
if speech then
  set('speechMs', fmt(speech))
  set('coveredMs', fmt(covered))
  if gaps ~= '' then set('gaps', gaps) end
  if more > 0 then set('moreGaps', fmt(more)) end
end
return commit()
`;

/** A credit figure of the session was refused before reaching the store (and counted there): its
 * usage is estimated. */
export const REFUSED =
  session +
  `
refuse()
return stateReply(1)
`;

/** The tenant step refused version ARGV[3]: its change is taken back (if it is still the last one). */
export const REVERT =
  session +
  `
local ver = int(ARGV[3], 1, MAX)
local u = redis.call('HGET', sk, 'undo')
if ver and u and tonumber(redis.call('HGET', sk, 'ver') or '0') == ver then
  local d = cjson.decode(u)
  if tonumber(d.v) == ver then
    for f, before in pairs(d.f) do
      if before then redis.call('HSET', sk, f, before) else redis.call('HDEL', sk, f) end
    end
    redis.call('HDEL', sk, 'undo')
    redis.call('HSET', sk, 'ver', fmt(ver + 1))
  end
end
return refuse()
`;

/**
 * The tenant step. KEYS: hour bucket, day bucket, hour index, day index, credit total, settled hash,
 * sessions set (all of one tenant). ARGV[3..14]: sessionKey, version, credits, media, base micro,
 * base media, base sessions, start, hour start, day start, speech, covered (absent: 0). 1 settled,
 * 0 nothing newer, -1 refused.
 */
export const SETTLE =
  common +
  `
local key = ARGV[3]
local ver, target, media = int(ARGV[4], 0, MAX), int(ARGV[5], 0, MAX), int(ARGV[6], 0, MAX)
local base = { int(ARGV[7], 0, MAX), int(ARGV[8], 0, MAX), int(ARGV[9], 0, 1) }
local start, hstart, dstart = int(ARGV[10], 0, MAX), int(ARGV[11], 0, MAX), int(ARGV[12], 0, MAX)
local speech, covered = int(ARGV[13] or '0', 0, MAX), int(ARGV[14] or '0', 0, MAX)
if key == '' or not ver or not target or not media or not base[1] or not base[2] or not base[3] or not start or not hstart or not dstart or not speech or not covered then
  return redis.error_reply('ERR bad settlement')
end
local settled = { -1, base[1], base[2], base[3] }
local cur = redis.call('HGET', KEYS[6], key)
if cur then
  local i = 1
  for n in string.gmatch(cur, '[^:]+') do settled[i] = tonumber(n); i = i + 1 end
end
if ver <= settled[1] then return 0 end
local was = { 0, 0 }
local cov = redis.call('HGET', KEYS[6], 'c:' .. key)
if cov then
  local i = 1
  for n in string.gmatch(cov, '[^:]+') do was[i] = tonumber(n) or 0; i = i + 1 end
end
local d = { target - settled[2], media - settled[3], 1 - settled[4], speech - was[1], covered - was[2] }
local total = tonumber(redis.call('GET', KEYS[5]) or '0') + d[1]
if total < 0 or total > MAX then return -1 end
local FIELDS = { 'micro', 'mediaMs', 'sessions', 'speechMs', 'coveredMs' }
for b = 1, 2 do
  local v = redis.call('HMGET', KEYS[b], unpack(FIELDS))
  for i = 1, #FIELDS do
    local n = tonumber(v[i] or '0') + d[i]
    if n < 0 or n > MAX then return -1 end
  end
end
if d[1] ~= 0 or d[2] ~= 0 or d[3] ~= 0 or d[4] ~= 0 or d[5] ~= 0 then
  local grains = { { hstart, 3600000 }, { dstart, 86400000 } }
  for b = 1, 2 do
    for i = 1, #FIELDS do
      if d[i] ~= 0 then redis.call('HINCRBY', KEYS[b], FIELDS[i], fmt(d[i])) end
    end
    local bstart, g = grains[b][1], grains[b][2]
    redis.call('PEXPIREAT', KEYS[b], fmt(bstart + retention))
    redis.call('ZADD', KEYS[2 + b], fmt(bstart), fmt(bstart))
    redis.call('ZREMRANGEBYSCORE', KEYS[2 + b], '-inf', '(' .. fmt(now - retention - g))
    redis.call('PEXPIRE', KEYS[2 + b], fmt(retention + g))
  end
end
if d[1] ~= 0 then redis.call('INCRBY', KEYS[5], fmt(d[1])) end
redis.call('HSET', KEYS[6], key, fmt(ver) .. ':' .. fmt(target) .. ':' .. fmt(media) .. ':1')
if d[4] ~= 0 or d[5] ~= 0 then redis.call('HSET', KEYS[6], 'c:' .. key, fmt(speech) .. ':' .. fmt(covered)) end
redis.call('PEXPIREAT', KEYS[6], fmt(dstart + retention + 86400000))
redis.call('ZADD', KEYS[7], fmt(start), key)
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', '(' .. fmt(now - retention))
redis.call('PEXPIRE', KEYS[7], fmt(retention))
return 1
`;

/** KEYS: the tenants set, their order of first start (METRICS_MAX_TENANTS keeps the first). ARGV[1]: tenant. */
export const REGISTER = `
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', string.format('%d', redis.call('ZCARD', KEYS[2])), ARGV[1])
return 1
`;

/**
 * Limiter lease acquire. KEYS[1] tenant lease set (member sessionKey, score expiry ms).
 * ARGV: sessionKey, max, ttlMs. Uses the server clock so replicas with skewed clocks agree.
 */
export const LEASE_ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local have = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not have and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;

/** Lease renew: re-adds the leases of one tenant (the sessions are running whether or not their leases
 * lapsed) in one ZADD. ARGV: ttlMs, then the session keys. */
export const LEASE_RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local exp = string.format('%d', now + ttl)
local args = {}
for i = 2, #ARGV do
  args[#args + 1] = exp
  args[#args + 1] = ARGV[i]
end
if #args > 0 then redis.call('ZADD', KEYS[1], unpack(args)) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;

/** Migration of a ledger key to its new name: renamed, or merged into a key of that name the new code
 * already wrote (hash counters added, sorted sets united), keeping the longer expiry. KEYS: old, new.
 * ARGV[1]: 'hash' or 'zset'. */
export const MIGRATE_KEY = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  return 1
end
local ttl = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]))
if ARGV[1] == 'hash' then
  local h = redis.call('HGETALL', KEYS[1])
  for i = 1, #h, 2 do redis.call('HINCRBY', KEYS[2], h[i], h[i + 1]) end
else
  redis.call('ZUNIONSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'AGGREGATE', 'MAX')
end
redis.call('DEL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
`;

/** Migration of one tenant's credit total out of the old 'credits' hash. KEYS: the old hash, the new
 * total. ARGV[1]: tenant. */
export const MIGRATE_CREDITS = `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
redis.call('INCRBY', KEYS[2], v)
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`;

/** Migration of the registry. KEYS: old tenants set, old order, new tenants set, new order. */
export const MIGRATE_REGISTRY = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SUNIONSTORE', KEYS[3], KEYS[3], KEYS[1])
  redis.call('DEL', KEYS[1])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  -- Tenants of the old order started first: they keep their ranks, the new ones follow.
  local order = redis.call('ZRANGE', KEYS[2], 0, -1)
  for _, t in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do order[#order + 1] = t end
  redis.call('DEL', KEYS[4], KEYS[2])
  for _, t in ipairs(order) do
    redis.call('ZADD', KEYS[4], 'NX', string.format('%d', redis.call('ZCARD', KEYS[4])), t)
  end
end
return 1
`;
