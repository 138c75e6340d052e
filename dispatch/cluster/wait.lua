-- KEYS[1] a wait set; ARGV: member, expire_ms, age_ms (optional: how long
-- the waiter has already waited). Adds member at Redis's now less age_ms,
-- its arrival (its priority shift is in the member: see take.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now - (tonumber(ARGV[3]) or 0), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
