// Test fixture: the ledger's Lua scripts as they were before Cluster support (one Redis, keys derived
// inside the scripts), to write a ledger in the old layout that an upgrade must keep visible.
// Copied unchanged from src/usage/lua.ts of that version; not used by the gateway.
import { MAX_MICRO_PER_MESSAGE, MAX_SEGMENTS, MAX_TOTAL } from '../../src/usage/model.js';

const prelude = `
local MAX_SEGMENTS = ${MAX_SEGMENTS}
local MAX = ${MAX_TOTAL}
local MAX_MESSAGE = ${MAX_MICRO_PER_MESSAGE}
local P = ARGV[1]
local sk = KEYS[1]
local function fmt(n) return string.format('%d', n) end
-- An integer in lo..hi from an argument, or nil (also for nan, inf and fractions).
local function int(s, lo, hi)
  local n = tonumber(s)
  if not n or n ~= math.floor(n) or n < lo or n > hi then return nil end
  return n
end
local now = int(ARGV[2], 0, MAX)
local retention = int(ARGV[3], 1, MAX)
if not now or not retention then return redis.error_reply('ERR bad clock or retention') end
local GRAINS = { { 'h', 3600000 }, { 'd', 86400000 } }

local function bucketStart(start, g) return start - math.fmod(start, g[2]) end
local function bucketKey(tenant, endpoint, start, g)
  return P .. 'b:' .. tenant .. ':' .. endpoint .. ':' .. g[1] .. ':' .. fmt(bucketStart(start, g))
end

local function bump(tenant, endpoint, start, field, delta)
  if delta == 0 then return end
  for _, g in ipairs(GRAINS) do
    local bstart = bucketStart(start, g)
    local bkey = bucketKey(tenant, endpoint, start, g)
    redis.call('HINCRBY', bkey, field, fmt(delta))
    redis.call('PEXPIREAT', bkey, fmt(bstart + retention))
    local ikey = P .. 'bi:' .. tenant .. ':' .. endpoint .. ':' .. g[1]
    redis.call('ZADD', ikey, fmt(bstart), fmt(bstart))
    redis.call('ZREMRANGEBYSCORE', ikey, '-inf', '(' .. fmt(now - retention - g[2]))
    redis.call('PEXPIRE', ikey, fmt(retention + g[2]))
  end
end

local function field(name, seg)
  if seg == 0 then return name end
  return name .. ':' .. fmt(seg)
end

local function nsegs() return tonumber(redis.call('HGET', sk, 'nseg') or '1') end

-- Notes a (valid) segment in 'nseg'.
local function noteSegment(seg)
  if seg + 1 > nsegs() then redis.call('HSET', sk, 'nseg', fmt(seg + 1)) end
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

-- Would every total stay in 0..MAX once reconcile() ran, with segment oseg at oval, the
-- session's media at media, and (a start) st = { tenant, endpoint, start }? Reads only.
local function fits(oseg, oval, media, st)
  local v = redis.call('HMGET', sk, 'tenant', 'endpoint', 'start', 'counted', 'mediaMs', 'mediaCounted')
  local target = credits(oseg, oval)
  if target > MAX then return false end
  local tenant, endpoint, start, dSessions = v[1], v[2], tonumber(v[3]), 0
  if st then tenant, endpoint, start, dSessions = st[1], st[2], st[3], 1 end
  if not tenant or not start then return true end -- no buckets yet: the start checks them
  local dMicro, dMedia = target - tonumber(v[4] or '0'), 0
  if not v[6] then dMedia = tonumber(media or v[5] or '0') end
  local total = tonumber(redis.call('HGET', P .. 'credits', tenant) or '0') + dMicro
  if total < 0 or total > MAX then return false end
  for _, g in ipairs(GRAINS) do
    local b = redis.call('HMGET', bucketKey(tenant, endpoint, start, g), 'micro', 'mediaMs', 'sessions')
    for i, d in ipairs({ dMicro, dMedia, dSessions }) do
      local n = tonumber(b[i] or '0') + d
      if n < 0 or n > MAX then return false end
    end
  end
  return true
end

-- Brings the buckets in line with the session: its credits, and media once ended.
local function reconcile()
  local v = redis.call('HMGET', sk, 'tenant', 'endpoint', 'start', 'counted', 'mediaMs', 'mediaCounted')
  if not v[1] or not v[3] then return end
  local start = tonumber(v[3])
  local target = credits()
  local counted = tonumber(v[4] or '0')
  if target ~= counted then
    bump(v[1], v[2], start, 'micro', target - counted)
    redis.call('HINCRBY', P .. 'credits', v[1], fmt(target - counted))
    redis.call('HSET', sk, 'counted', fmt(target))
  end
  if v[5] and not v[6] then
    bump(v[1], v[2], start, 'mediaMs', tonumber(v[5]))
    redis.call('HSET', sk, 'mediaCounted', '1')
  end
end

local function keepFor()
  local start = redis.call('HGET', sk, 'start')
  if start then redis.call('PEXPIREAT', sk, fmt(tonumber(start) + retention))
  else redis.call('PEXPIRE', sk, fmt(retention)) end
end

-- The event does not fit: nothing of it is written, only the mark that makes the session estimated.
local function refuse()
  redis.call('HSET', sk, 'refused', '1')
  keepFor()
  return -1
end
`;

/** ARGV[4..9]: sessionKey, tenant, endpoint, start, interactionId ('' = none), environment ('' = none). */
export const START =
  prelude +
  `
if redis.call('HEXISTS', sk, 'started') == 1 then return 0 end
local key, tenant, endpoint, start, iid, env = ARGV[4], ARGV[5], ARGV[6], int(ARGV[7], 0, MAX), ARGV[8], ARGV[9] or ''
if key == '' or tenant == '' or endpoint == '' or not start then return redis.error_reply('ERR bad start event') end
if not fits(nil, nil, nil, { tenant, endpoint, start }) then return refuse() end
redis.call('HSET', sk, 'started', '1', 'sessionKey', key, 'tenant', tenant, 'endpoint', endpoint, 'start', fmt(start))
if iid ~= '' then redis.call('HSET', sk, 'iid', iid) end
if env ~= '' then redis.call('HSET', sk, 'env', env) end
keepFor()
redis.call('SADD', P .. 'tenants', tenant)
redis.call('ZADD', P .. 'torder', 'NX', fmt(redis.call('ZCARD', P .. 'torder')), tenant)
local tz = P .. 'ts:' .. tenant
redis.call('ZADD', tz, fmt(start), key)
redis.call('ZREMRANGEBYSCORE', tz, '-inf', '(' .. fmt(now - retention))
redis.call('PEXPIRE', tz, fmt(retention))
bump(tenant, endpoint, start, 'sessions', 1)
reconcile()
return 1
`;

const outOfRange = `return redis.error_reply('ERR segment out of range: ' .. string.sub(ARGV[4], 1, 20))`;

/** ARGV[4..5]: segment, upstream session id. */
export const UPSTREAM =
  prelude +
  `
local seg = int(ARGV[4], 0, MAX_SEGMENTS - 1)
if not seg then ${outOfRange} end
noteSegment(seg)
redis.call('HSET', sk, field('usid', seg), ARGV[5])
keepFor()
return 1
`;

/** ARGV[4..7]: segment, seq, kind ('delta'|'final'), micro-credits. */
export const USAGE =
  prelude +
  `
local seg, seq, kind = int(ARGV[4], 0, MAX_SEGMENTS - 1), int(ARGV[5], -MAX, MAX), ARGV[6]
if not seg then ${outOfRange} end
if not seq or (kind ~= 'delta' and kind ~= 'final') then return redis.error_reply('ERR bad usage event') end
local marker = 's:' .. fmt(seq)
if redis.call('HEXISTS', sk, marker) == 1 then return 0 end
local micro = int(ARGV[7], 0, MAX_MESSAGE)
if not micro then return refuse() end
local v = redis.call('HMGET', sk, field('final', seg), field('dsum', seg))
local dsum = tonumber(v[2] or '0')
local value = micro
if kind == 'delta' then
  dsum = dsum + micro
  value = tonumber(v[1] or dsum)
end
if dsum > MAX or not fits(seg, value) then return refuse() end
noteSegment(seg)
redis.call('HSET', sk, marker, '1')
if kind == 'final' then
  redis.call('HSET', sk, field('final', seg), fmt(micro))
else
  redis.call('HSET', sk, field('dsum', seg), fmt(dsum))
end
keepFor()
reconcile()
return 1
`;

/** ARGV[4..6]: outcome, mediaMs, endedAt. */
export const END =
  prelude +
  `
if redis.call('HEXISTS', sk, 'ended') == 1 then return 0 end
local outcome, mediaMs, at = ARGV[4], int(ARGV[5], 0, MAX), int(ARGV[6], 0, MAX)
if outcome == '' or not mediaMs or not at then return redis.error_reply('ERR bad end event') end
if not fits(nil, nil, mediaMs) then return refuse() end
redis.call('HSET', sk, 'ended', '1', 'outcome', outcome, 'mediaMs', fmt(mediaMs), 'end', fmt(at))
keepFor()
reconcile()
return 1
`;

/** A credit figure of the session was refused before reaching the store: its usage is estimated. */
export const REFUSED =
  prelude +
  `
refuse()
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

/** Lease renew: re-adds the lease (the session is running whether or not its lease lapsed). ARGV: sessionKey, ttlMs. */
export const LEASE_RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;
