-- KEYS[1] the resource's leases, KEYS[2] its long leases, then the
-- returned marks of the fenced leases, in their order. ARGV: ttl_ms, the
-- freed channel, the announcement (KEYS[1]), then pairs of a lease id and
-- "1" for a fenced return (see readd.lua) or "0". Returns the leases of
-- one resource (every return of one batch on it) and announces the
-- resource once, only when a lease was removed: a return of a lease Redis
-- does not hold (a take refused or never run, a return sent again) wakes
-- no edge. A fenced return marks its lease returned for the TTL, then
-- removes it; its mark refused (out of memory: the script's first write;
-- a read-only replica) removes nothing, since a removal run unmarked
-- would let a re-add still on its way put the lease back for the TTL. A
-- key of another type is refused once every removal was tried. Returns
-- the number of leases removed, or the first refusal (after the
-- announcement: the removals made stand).
local refused
local removed = 0
local mark = 3
for i = 4, #ARGV - 1, 2 do
  local ok = true
  if ARGV[i + 1] == '1' then
    local r = redis.pcall('SET', KEYS[mark], 1, 'PX', ARGV[1])
    mark = mark + 1
    if type(r) == 'table' and r['err'] then
      refused = refused or r
      ok = false
    end
  end
  if ok then
    local gone = false
    for k = 1, 2 do
      local r = redis.pcall('ZREM', KEYS[k], ARGV[i])
      if type(r) == 'table' and r['err'] then
        refused = refused or r
      elseif r == 1 then
        gone = true
      end
    end
    if gone then
      removed = removed + 1
    end
  end
end
if removed > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
if refused then
  return refused
end
return removed
