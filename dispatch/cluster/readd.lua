-- KEYS[1] the resource's leases, KEYS[2] its long leases, KEYS[3] the
-- lease's returned mark. ARGV: ttl_ms, the lease id, "1" for a long
-- lease. Puts back a lease its edge still holds that the ledger lost (see
-- renew.lua), live for the TTL whatever the count: the work is running,
-- and every edge must count it. A lease marked returned (its fenced
-- return ran before this script, which came late) is not put back. A key
-- of another type (see take.lua) is left alone.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
for i = 1, 2 do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind ~= 'zset' and kind ~= 'none' then
    return 0
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local function put(key)
  redis.call('ZADD', key, now + ttl, ARGV[2])
  -- Expiries only raised, as in take.lua.
  if redis.call('PTTL', key) < 2 * ttl then
    redis.call('PEXPIRE', key, 2 * ttl)
  end
end
put(KEYS[1])
if ARGV[3] == '1' then
  put(KEYS[2])
end
return 1
