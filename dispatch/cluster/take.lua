-- KEYS[1] the resource's leases, KEYS[2] its long leases (sorted sets,
-- score = expiry in Redis milliseconds).
-- ARGV: ttl_ms, capacity, long_capacity, is_long ("1"/"0"), lease id.
-- Returns 1 when the lease was taken, 0 when the cluster has no free slot.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
if ARGV[4] == '1' and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[5])
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
  redis.call('PEXPIRE', KEYS[2], 2 * ttl)
end
return 1
