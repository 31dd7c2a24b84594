// Lua scripts that make each ledger event one atomic, idempotent Redis update.
// KEYS[1] is the session hash; bucket, index and tenant keys derive from the session's stored
// tenant, endpoint and start (single Redis or a primary/replica pair, not Redis Cluster).
// ARGV[1] key prefix, ARGV[2] now (ms), ARGV[3] retention (ms), then per-script arguments.
// Replays are no-ops: 'started'/'ended' flags and one 's:<seq>' marker per usage message.
// Segment n (the session's n-th upstream session) keeps 'usid', 'final' and 'dsum' with the
// suffix ':n'; segment 0 has none, so hashes written before segments existed read as segment 0,
// and 'nseg' (absent: 1) bounds the segments to add up.
// Every credit figure is an integer (micro-credits); string.format('%d') keeps Lua from
// printing large numbers in exponent form.
import { MAX_SEGMENTS } from './model.js';

const prelude = `
local MAX_SEGMENTS = ${MAX_SEGMENTS}
local P = ARGV[1]
local now = tonumber(ARGV[2])
local retention = tonumber(ARGV[3])
local sk = KEYS[1]
local function fmt(n) return string.format('%d', n) end
local GRAINS = { { 'h', 3600000 }, { 'd', 86400000 } }

local function bump(tenant, endpoint, start, field, delta)
  if delta == 0 then return end
  for _, g in ipairs(GRAINS) do
    local bstart = start - math.fmod(start, g[2])
    local bkey = P .. 'b:' .. tenant .. ':' .. endpoint .. ':' .. g[1] .. ':' .. fmt(bstart)
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

-- The event's segment, noted in 'nseg'; nil when out of range (the event is refused).
local function segment(arg)
  local seg = tonumber(arg)
  if not seg or seg < 0 or seg >= MAX_SEGMENTS or seg ~= math.floor(seg) then return nil end
  if seg + 1 > tonumber(redis.call('HGET', sk, 'nseg') or '1') then redis.call('HSET', sk, 'nseg', fmt(seg + 1)) end
  return seg
end

-- Sum over segments of (final ?? sum of deltas).
local function credits()
  local sum = 0
  for seg = 0, tonumber(redis.call('HGET', sk, 'nseg') or '1') - 1 do
    local v = redis.call('HMGET', sk, field('final', seg), field('dsum', seg))
    sum = sum + tonumber(v[1] or v[2] or '0')
  end
  return sum
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
`;

/** ARGV[4..8]: sessionKey, tenant, endpoint, start, interactionId ('' = none). */
export const START = prelude + `
if redis.call('HSETNX', sk, 'started', '1') == 0 then return 0 end
local key, tenant, endpoint, start, iid = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
redis.call('HSET', sk, 'sessionKey', key, 'tenant', tenant, 'endpoint', endpoint, 'start', fmt(start))
if iid ~= '' then redis.call('HSET', sk, 'iid', iid) end
keepFor()
redis.call('SADD', P .. 'tenants', tenant)
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
export const UPSTREAM = prelude + `
local seg = segment(ARGV[4])
if not seg then ${outOfRange} end
redis.call('HSET', sk, field('usid', seg), ARGV[5])
keepFor()
return 1
`;

/** ARGV[4..7]: segment, seq, kind ('delta'|'final'), micro-credits. */
export const USAGE = prelude + `
local seg = segment(ARGV[4])
if not seg then ${outOfRange} end
if redis.call('HSETNX', sk, 's:' .. ARGV[5], '1') == 0 then return 0 end
if ARGV[6] == 'final' then
  redis.call('HSET', sk, field('final', seg), ARGV[7])
else
  redis.call('HINCRBY', sk, field('dsum', seg), ARGV[7])
end
keepFor()
reconcile()
return 1
`;

/** ARGV[4..6]: outcome, mediaMs, endedAt. */
export const END = prelude + `
if redis.call('HSETNX', sk, 'ended', '1') == 0 then return 0 end
redis.call('HSET', sk, 'outcome', ARGV[4], 'mediaMs', ARGV[5], 'end', ARGV[6])
keepFor()
reconcile()
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
