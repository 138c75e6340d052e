-- KEYS[1] the resource's leases, KEYS[2] its long leases, KEYS[3] the
-- lease's returned mark. ARGV: ttl_ms, the lease id. A fenced return (see
-- readd.lua): marks the lease returned for the TTL, then removes it. One
-- script, so that the removal never runs without the mark: the SET is its
-- first write, which Redis refuses (out of memory, a read-only replica)
-- before anything is removed; a removal run unmarked would let a re-add
-- still on its way put the lease back for the TTL. A key of another type
-- is refused (its error reply returned) once both removals were tried.
redis.call('SET', KEYS[3], 1, 'PX', ARGV[1])
local refused
for i = 1, 2 do
  local r = redis.pcall('ZREM', KEYS[i], ARGV[2])
  if type(r) == 'table' and r['err'] then
    refused = r
  end
end
if refused then
  return refused
end
return 1
