-- KEYS[1] the resource's leases, KEYS[2] its long leases.
-- ARGV: ttl_ms, then the lease ids of this edge to extend. Members that
-- already expired (or were removed) are not added back (ZADD XX).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
    if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
      redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[i])
    end
  end
end
-- Expiries only raised, as in take.lua.
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < 2 * ttl then
    redis.call('PEXPIRE', key, 2 * ttl)
  end
end
return 1
