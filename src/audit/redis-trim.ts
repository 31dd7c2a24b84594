// The one script that writes a tenant's audit trail in Redis: the event added (when it is one), then
// the oldest members removed while they are past the retention or the trail is past its bytes, the
// trail's byte count kept beside it, both expiring with the retention. A trail is made only when the
// caller says its tenant is known. Bytes are the members' own plus MEMBER_OVERHEAD each (Redis's
// bookkeeping); a trail written before byte counts has its count estimated from its newest members.
// KEYS[1] the trail (a sorted set), KEYS[2] its byte count (byteCountKey: the same Cluster slot).
// ARGV: score, member ('' = only trim), oldest score kept, bytes allowed, retention ms, create (1/0),
// overhead a member, members removed at most in one call.
// Returns the trail's bytes after the call, or -1 when there is no trail (and none was made).
export const TRIM = `
local trail, count = KEYS[1], KEYS[2]
local member, overhead = ARGV[2], tonumber(ARGV[7])
if redis.call('EXISTS', trail) == 0 then
  redis.call('DEL', count)
  if ARGV[6] ~= '1' or member == '' then return -1 end
end
local bytes = tonumber(redis.call('GET', count) or '-1')
if bytes < 0 then
  bytes = 0
  local n = redis.call('ZCARD', trail)
  if n > 0 then
    local sample, sum = redis.call('ZRANGE', trail, -16, -1), 0
    for _, m in ipairs(sample) do sum = sum + #m end
    bytes = math.floor(n * (sum / #sample + overhead))
  end
end
if member ~= '' then
  redis.call('ZADD', trail, ARGV[1], member)
  bytes = bytes + #member + overhead
end
local oldest, limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[8])
while budget > 0 do
  local first = redis.call('ZRANGE', trail, 0, 0, 'WITHSCORES')
  if #first == 0 or (tonumber(first[2]) >= oldest and bytes <= limit) then break end
  local batch, k = redis.call('ZRANGE', trail, 0, 63, 'WITHSCORES'), 0
  for i = 1, #batch, 2 do
    if tonumber(batch[i + 1]) >= oldest and bytes <= limit then break end
    bytes = bytes - #batch[i] - overhead
    k = k + 1
  end
  redis.call('ZREMRANGEBYRANK', trail, 0, k - 1)
  budget = budget - k
end
if redis.call('EXISTS', trail) == 0 then
  redis.call('DEL', count)
  return 0
end
if bytes < 0 then bytes = 0 end
if member == '' then
  local ttl = redis.call('PTTL', trail)
  if ttl > 0 then redis.call('SET', count, bytes, 'PX', ttl) else redis.call('SET', count, bytes) end
else
  redis.call('SET', count, bytes, 'PX', ARGV[5])
  redis.call('PEXPIRE', trail, ARGV[5])
end
return bytes
`;

/** The byte count's key, in the trail's Cluster slot: the trail's own hash tag, or its whole name as one.
 * (A trail name with a `}` and no hash tag has no such key: its writes fail, and are counted.) */
export function byteCountKey(trail: string): string {
  const open = trail.indexOf('{');
  const close = open < 0 ? -1 : trail.indexOf('}', open + 1);
  return close > open + 1 ? `${trail}:bytes` : `{${trail}}:bytes`;
}
