-- KEYS[1] the resource's leases, KEYS[2] its long leases.
-- ARGV: ttl_ms, then pairs of a lease id of this edge to extend and
-- "1"/"0" (a long lease or not). Members that already expired (or were
-- removed) are not added back (ZADD XX): they are returned, and the caller
-- puts back those it still holds, in order with its returns (readd.lua).
-- A key of another type counts as holding none of them.
local function alive(key, id, now)
  local s = redis.pcall('ZSCORE', key, id)
  return type(s) == 'string' and tonumber(s) > now
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local missing = {}
for i = 2, #ARGV - 1, 2 do
  local id, long = ARGV[i], ARGV[i + 1] == '1'
  if alive(KEYS[1], id, now) and (not long or alive(KEYS[2], id, now)) then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, id)
    if long then
      redis.call('ZADD', KEYS[2], 'XX', now + ttl, id)
    end
  else
    missing[#missing + 1] = id
  end
end
-- Expiries only raised, as in take.lua.
for _, key in ipairs(KEYS) do
  if redis.call('TYPE', key)['ok'] == 'zset' and redis.call('PTTL', key) < 2 * ttl then
    redis.call('PEXPIRE', key, 2 * ttl)
  end
end
return missing
